import { StackValidationPolicy, UnknownValueError } from "@pulumi/policy";

const COMMIT = /^[0-9a-f]{40}$/;

/** A model.hub download (infra/providers/hubModel.ts), as the policy sees its resource. */
interface HubModelProps {
    repo?: unknown;
    revision?: unknown;
    commit?: unknown;
    script?: unknown;
}

/** The commit the revision named at the Hub, when known (not yet in a preview that creates the resource). */
function resolvedCommit(p: HubModelProps): string {
    try {
        return typeof p.commit === "string" && COMMIT.test(p.commit) ? ` (today it names ${p.commit})` : "";
    } catch (e) {
        if (e instanceof UnknownValueError) return "";
        throw e;
    }
}

export const hubRevisionPinned: StackValidationPolicy = {
    name: "hub-revision-pinned",
    description:
        "Advisory: model.hub.revision should be a full commit hash. A branch or tag name moves on the Hub: the next " +
        "up (or a host added later) downloads whatever it names then, a different model under the same stack.",
    enforcementLevel: "advisory",
    severity: "low",
    validateStack: (args, reportViolation) => {
        for (const r of args.resources) {
            const p = r.props as HubModelProps;
            if (r.type !== "pulumi-nodejs:dynamic:Resource" || typeof p.repo !== "string" || typeof p.script !== "string") continue;
            if (typeof p.revision !== "string" || COMMIT.test(p.revision)) continue;
            const now = resolvedCommit(p);
            reportViolation(
                `model.hub.revision '${p.revision}' of ${p.repo} is a branch or tag name${now}. ` +
                    "Pin the commit: set model.hub.revision to its 40-character hash.",
                r.urn,
            );
        }
    },
};
