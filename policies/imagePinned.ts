import { StackValidationPolicy } from "@pulumi/policy";
import { ContainerView, LABEL, describe, label, managedContainers } from "./lib/container";

const DIGEST = /@sha256:[0-9a-f]{64}$/i;
const IMAGE_ID = /^(sha256:)?[0-9a-f]{64}$/i;

/** True when the reference names exactly one image: a digest reference or a full image ID. */
export function isPinned(ref: string): boolean {
    return DIGEST.test(ref) || IMAGE_ID.test(ref);
}

export const imagePinned: StackValidationPolicy = {
    name: "image-pinned",
    description:
        "Advisory: the configured image reference (label vllm-cluster.image-ref) should be pinned by digest " +
        "(repo@sha256:...). The containers themselves run the image ID resolved on each host, so a tag cannot " +
        "change a running container; but the next distribution, a host added later, or a registry pull resolves " +
        "the tag again and can get a different image.",
    enforcementLevel: "advisory",
    severity: "low",
    validateStack: (args, reportViolation) => {
        // One report per distinct reference, not one per container: they all come from the same config value.
        const byRef = new Map<string, ContainerView[]>();
        for (const { view } of managedContainers(args.resources)) {
            const ref = label(view, LABEL.imageRef);
            if (typeof ref !== "string" || ref === "" || isPinned(ref)) continue;
            byRef.set(ref, [...(byRef.get(ref) ?? []), view]);
        }
        for (const [ref, views] of byRef) {
            const tag = /:[^/]+$/.test(ref) ? "" : " (implicitly :latest)";
            reportViolation(
                `image ref '${ref}'${tag} is a mutable tag, used by ${views.map(describe).join(", ")}. ` +
                    "Pin it by digest: set image.ref to <repo>@sha256:<digest> " +
                    `(docker image inspect --format '{{index .RepoDigests 0}}' ${ref}).`,
                views[0].urn,
            );
        }
    },
};
