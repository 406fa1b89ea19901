/* The embedded default data set: docs/definition.md section 1, 150,000 little-endian f64, generated
 * by numpy (tollfree.data.synthetic_close) and committed as data/default_close.f64. A test
 * checks that the committed bytes equal what numpy produces. */
    .section .rodata
    .balign 64
    .globl tf_default_close
    .type tf_default_close, @object
tf_default_close:
    .incbin TF_DEFAULT_DATA
tf_default_close_end:
    .size tf_default_close, tf_default_close_end - tf_default_close
    .balign 8
    .globl tf_default_close_bytes
    .type tf_default_close_bytes, @object
tf_default_close_bytes:
    .quad tf_default_close_end - tf_default_close
    .size tf_default_close_bytes, 8
    .section .note.GNU-stack,"",@progbits
