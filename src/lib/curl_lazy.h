/* libcurl is not linked: curl_lazy.c loads it (dlopen) on first use and forwards the calls
 * registry.c makes. */
#pragma once

/* Load it now: 0, or -ELIBACC when libcurl (CURL_SONAME) cannot be loaded. */
int curl_lazy_load(void);
