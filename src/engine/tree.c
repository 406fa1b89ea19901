/* The price levels of one book side outside its ladder window (ladder.c), as a red-black tree
 * of level indices (CLRS, with level 0 as the black sentinel). O(log levels) to add or drop a
 * level whatever the prices, so a hostile stream of far-apart prices costs neither memory (one
 * pool entry per level) nor time. A tree also holds the side's kept empty levels outside the
 * window (book.c); ladder.c's walk steps over them.
 * The sentinel's parent field is written during removal (as CLRS does); nothing reads it after. */
#include "engine/engine_internal.h"

#define L(i) (e->levels[(i)])

static void rotate_left(tf_engine *e, eng_side *s, uint32_t x)
{
    uint32_t y = L(x).right;
    L(x).right = L(y).left;
    if (L(y).left)
        L(L(y).left).parent = x;
    L(y).parent = L(x).parent;
    if (!L(x).parent)
        s->root = y;
    else if (x == L(L(x).parent).left)
        L(L(x).parent).left = y;
    else
        L(L(x).parent).right = y;
    L(y).left = x;
    L(x).parent = y;
}

static void rotate_right(tf_engine *e, eng_side *s, uint32_t x)
{
    uint32_t y = L(x).left;
    L(x).left = L(y).right;
    if (L(y).right)
        L(L(y).right).parent = x;
    L(y).parent = L(x).parent;
    if (!L(x).parent)
        s->root = y;
    else if (x == L(L(x).parent).right)
        L(L(x).parent).right = y;
    else
        L(L(x).parent).left = y;
    L(y).right = x;
    L(x).parent = y;
}

void eng_tree_insert(tf_engine *e, eng_side *s, uint32_t z)
{
    int64_t key = L(z).key;
    uint32_t y = 0, x = s->root;
    while (x) {
        y = x;
        x = key < L(x).key ? L(x).left : L(x).right;
    }
    L(z).parent = y;
    L(z).left = L(z).right = 0;
    L(z).red = 1;
    if (!y)
        s->root = z;
    else if (key < L(y).key)
        L(y).left = z;
    else
        L(y).right = z;

    while (L(L(z).parent).red) {
        uint32_t p = L(z).parent, g = L(p).parent;
        if (p == L(g).left) {
            uint32_t u = L(g).right;
            if (L(u).red) {
                L(p).red = L(u).red = 0;
                L(g).red = 1;
                z = g;
                continue;
            }
            if (z == L(p).right) {
                z = p;
                rotate_left(e, s, z);
                p = L(z).parent;
                g = L(p).parent;
            }
            L(p).red = 0;
            L(g).red = 1;
            rotate_right(e, s, g);
        } else {
            uint32_t u = L(g).left;
            if (L(u).red) {
                L(p).red = L(u).red = 0;
                L(g).red = 1;
                z = g;
                continue;
            }
            if (z == L(p).left) {
                z = p;
                rotate_right(e, s, z);
                p = L(z).parent;
                g = L(p).parent;
            }
            L(p).red = 0;
            L(g).red = 1;
            rotate_left(e, s, g);
        }
    }
    L(s->root).red = 0;
}

static uint32_t minimum(const tf_engine *e, uint32_t x)
{
    while (L(x).left)
        x = L(x).left;
    return x;
}

/* The in-order successor, empty or not. */
uint32_t eng_rbt_succ(const tf_engine *e, uint32_t x)
{
    if (L(x).right)
        return minimum(e, L(x).right);
    uint32_t y = L(x).parent;
    while (y && x == L(y).right) {
        x = y;
        y = L(y).parent;
    }
    return y;
}

uint32_t eng_rbt_first_above(const tf_engine *e, const eng_side *s, int64_t key)
{
    uint32_t found = 0;
    for (uint32_t x = s->root; x;)
        if (L(x).key > key) {
            found = x;
            x = L(x).left;
        } else {
            x = L(x).right;
        }
    return found;
}

static void transplant(tf_engine *e, eng_side *s, uint32_t u, uint32_t v)
{
    if (!L(u).parent)
        s->root = v;
    else if (u == L(L(u).parent).left)
        L(L(u).parent).left = v;
    else
        L(L(u).parent).right = v;
    L(v).parent = L(u).parent; /* v may be the sentinel: CLRS relies on this write */
}

static void remove_fixup(tf_engine *e, eng_side *s, uint32_t x)
{
    while (x != s->root && !L(x).red) {
        uint32_t p = L(x).parent;
        if (x == L(p).left) {
            uint32_t w = L(p).right;
            if (L(w).red) {
                L(w).red = 0;
                L(p).red = 1;
                rotate_left(e, s, p);
                w = L(p).right;
            }
            if (!L(L(w).left).red && !L(L(w).right).red) {
                L(w).red = 1;
                x = p;
            } else {
                if (!L(L(w).right).red) {
                    L(L(w).left).red = 0;
                    L(w).red = 1;
                    rotate_right(e, s, w);
                    w = L(p).right;
                }
                L(w).red = L(p).red;
                L(p).red = 0;
                L(L(w).right).red = 0;
                rotate_left(e, s, p);
                x = s->root;
            }
        } else {
            uint32_t w = L(p).left;
            if (L(w).red) {
                L(w).red = 0;
                L(p).red = 1;
                rotate_right(e, s, p);
                w = L(p).left;
            }
            if (!L(L(w).right).red && !L(L(w).left).red) {
                L(w).red = 1;
                x = p;
            } else {
                if (!L(L(w).left).red) {
                    L(L(w).right).red = 0;
                    L(w).red = 1;
                    rotate_left(e, s, w);
                    w = L(p).left;
                }
                L(w).red = L(p).red;
                L(p).red = 0;
                L(L(w).left).red = 0;
                rotate_right(e, s, p);
                x = s->root;
            }
        }
    }
    L(x).red = 0;
}

/* The best is not touched: book.c removes only empty levels, and ladder.c moves a level with
 * orders to the ladder under the same index. */
void eng_tree_remove(tf_engine *e, eng_side *s, uint32_t z)
{
    uint32_t y = z, x;
    uint32_t y_red = L(y).red;
    if (!L(z).left) {
        x = L(z).right;
        transplant(e, s, z, x);
    } else if (!L(z).right) {
        x = L(z).left;
        transplant(e, s, z, x);
    } else {
        y = minimum(e, L(z).right);
        y_red = L(y).red;
        x = L(y).right;
        if (L(y).parent == z) {
            L(x).parent = y;
        } else {
            transplant(e, s, y, x);
            L(y).right = L(z).right;
            L(L(y).right).parent = y;
        }
        transplant(e, s, z, y);
        L(y).left = L(z).left;
        L(L(y).left).parent = y;
        L(y).red = L(z).red;
    }
    if (!y_red)
        remove_fixup(e, s, x);
    L(0).parent = 0;
    L(0).red = 0;
}

/* Black height of the subtree at x, or -1 when it breaks a rule: keys strictly increasing in
 * order, parent links consistent, no red node with a red child, equal black heights. */
static int check(const tf_engine *e, uint32_t x, uint32_t parent, const int64_t *lo,
                 const int64_t *hi, uint64_t *count)
{
    if (!x)
        return 1;
    const eng_level *l = &e->levels[x];
    if (l->parent != parent || (lo && l->key <= *lo) || (hi && l->key >= *hi) ||
        (l->red && (L(l->left).red || L(l->right).red)))
        return -1;
    (*count)++;
    int a = check(e, l->left, x, lo, &l->key, count);
    int b = check(e, l->right, x, &l->key, hi, count);
    if (a < 0 || b < 0 || a != b)
        return -1;
    return a + !l->red;
}

int eng_rbt_check(const tf_engine *e, const eng_side *s, uint64_t *count)
{
    *count = 0;
    return L(s->root).red || check(e, s->root, 0, NULL, NULL, count) < 0 ? -1 : 0;
}
