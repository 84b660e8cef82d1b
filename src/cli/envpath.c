#include "cli/envpath.h"

#include <stdio.h>
#include <stdlib.h>

char *env_path(struct client *c, const char *name, const char *suffix, const char *query)
{
        char *esc = client_escape(c, name);
        char *path = NULL;
        if (esc && asprintf(&path, "/v1/envs/%s%s%s%s%s", esc, suffix ? "/" : "",
                            suffix ? suffix : "", query ? "?" : "", query ? query : "") < 0)
                path = NULL;
        free(esc);
        if (!path)
                fprintf(stderr, "paddock: out of memory\n");
        return path;
}
