/**
 * Config keys that hold secrets, set with `pulumi config set --secret KEY`. They are read apart from the cluster
 * config (infra/config.ts), never echoed, and a plain value is refused; this schema describes them for the generated
 * reference (docs/configuration.md).
 */
import { optional, string } from "./fields";

export const secretFields = {
    hfToken: optional(string()).meta({
        description: "The Hugging Face token for model.hub (gated or private repositories); reaches the host only on the download's stdin.",
        secret: true,
        across: "only with model.hub; refused when set without --secret",
    }),
};
