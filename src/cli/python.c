/* Running the Python package's side of a command (the panel/Dask sweep, the HTML report, the
 * paper loop's plot): one place that finds the package and the library for the child and picks
 * the interpreter. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

/* A build tree has the library beside the executable and the package in the sources; an
 * installed tree has PREFIX/bin, PREFIX/<libdir> and PREFIX/share/tollfree/python. The child
 * gets the package first on PYTHONPATH, and TOLLFREE_LIB / TOLLFREE_BIN unless already set. */
static int prepare_env(void)
{
    char dir[PATH_MAX], lib[PATH_MAX + 64], pkg[PATH_MAX + 64], bin[PATH_MAX + 64];
    char pypath[3 * PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", dir, sizeof dir - 1);
    dir[k > 0 ? k : 0] = '\0';
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    snprintf(lib, sizeof lib, "%s/libtollfree.so", dir);
    if (access(lib, F_OK) == 0) {
        snprintf(pkg, sizeof pkg, "%s", TF_SOURCE_PYTHON);
    } else {
        snprintf(lib, sizeof lib, "%s/../%s/libtollfree.so", dir, TF_INSTALL_LIBDIR);
        snprintf(pkg, sizeof pkg, "%s/../share/tollfree/python", dir);
    }
    snprintf(bin, sizeof bin, "%s/tollfree", dir);
    const char *old = getenv("PYTHONPATH");
    snprintf(pypath, sizeof pypath, "%s%s%s", pkg, old && *old ? ":" : "", old ? old : "");
    if (setenv("PYTHONPATH", pypath, 1) ||
        (!getenv("TOLLFREE_LIB") && access(lib, F_OK) == 0 && setenv("TOLLFREE_LIB", lib, 1)) ||
        (!getenv("TOLLFREE_BIN") && access(bin, X_OK) == 0 && setenv("TOLLFREE_BIN", bin, 1)))
        return -1;
    return 0;
}

char **tf_cli_python_argv(const char *module, int nargs, char *const *args)
{
    if (prepare_env())
        return NULL;
    /* Debian's interpreter has numpy, pandas and matplotlib; a PATH shim may not. */
    const char *py = getenv("TOLLFREE_PYTHON");
    if (!py || !*py)
        py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    char **argv = calloc((size_t)nargs + 4, sizeof *argv);
    if (!argv)
        return NULL;
    argv[0] = (char *)py;
    argv[1] = "-m";
    argv[2] = (char *)module;
    if (nargs)
        memcpy(argv + 3, args, sizeof *argv * (size_t)nargs);
    return argv;
}

int tf_cli_python_exec(const char *what, const char *module, int nargs, char *const *args)
{
    char **argv = tf_cli_python_argv(module, nargs, args);
    if (!argv) {
        fprintf(stderr, "tollfree %s: %s\n", what, strerror(errno ? errno : ENOMEM));
        return 1;
    }
    fflush(NULL);
    execvp(argv[0], argv);
    fprintf(stderr, "tollfree %s: cannot run %s -m %s: %s (set TOLLFREE_PYTHON)\n", what, argv[0],
            module, strerror(errno));
    free(argv);
    return 1;
}
