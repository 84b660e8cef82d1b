/* Allow rules (lib/netpolicy.c): "host[:port]", "*.domain", CIDRs, bracketed IPv6. The input is
 * "RULE\nNAME": the rule is parsed, its canonical text must parse back to the same text, and
 * NAME is matched against it as the DNS resolver would. */
#include "fuzz.h"
#include "lib/netpolicy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *s = fuzz_strdup(data, size);
        char *name = strchr(s, '\n');
        if (name)
                *name++ = '\0';
        enum net_mode mode;
        (void)netpolicy_mode_parse(s, &mode);
        struct allow_rule rule;
        if (netpolicy_rule_parse(s, &rule) == 0) {
                char text[512], again[512];
                struct allow_rule back;
                netpolicy_rule_format(&rule, text, sizeof(text));
                FUZZ_ASSERT(netpolicy_rule_parse(text, &back) == 0);
                netpolicy_rule_format(&back, again, sizeof(again));
                FUZZ_ASSERT(strcmp(text, again) == 0);

                struct netpolicy p = {.rules = &rule, .n_rules = 1};
                uint16_t port;
                if (name)
                        (void)netpolicy_allows_name(&p, name, &port);
                struct nft_cidr_rule out[2];
                FUZZ_ASSERT(netpolicy_cidrs(&p, out, 2) <= 1);
        }
        free(s);
        return 0;
}
