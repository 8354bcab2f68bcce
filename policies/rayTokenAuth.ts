import { ResourceValidationPolicy } from "@pulumi/policy";
import { CONTAINER_TYPE, RAY_ROLES, UNKNOWN, describe, managedRole, viewContainer } from "./lib/container";

/**
 * Mandatory: every Ray container runs with Ray's token authentication (RAY_AUTH_MODE=token and a token file, never
 * the token itself in the environment).
 */
export const rayTokenAuth: ResourceValidationPolicy = {
    name: "ray-token-auth",
    description:
        "Ray head and worker containers set RAY_AUTH_MODE=token with RAY_AUTH_TOKEN_PATH (the program's " +
        "ray.auth: token, its default). Without it anyone who reaches the Ray ports on the fabric can submit jobs, " +
        "that is run code, on every GPU host. RAY_AUTH_TOKEN in the environment would show the token to docker inspect.",
    // Ray without auth runs the code of anyone who reaches its ports on the fabric: not a choice to wave through.
    // A pack config with enforcementLevel "advisory" for this policy is the explicit, reviewable way out.
    enforcementLevel: "mandatory",
    severity: "critical",
    validateResource: (args, reportViolation) => {
        if (args.type !== CONTAINER_TYPE) return;
        const c = viewContainer(args.props, args.urn, args.name);
        const role = managedRole(c);
        if (role === undefined || !RAY_ROLES.includes(role) || !Array.isArray(c.envs) || c.envs.includes(UNKNOWN)) return;
        const envs = c.envs as string[];
        if (envs.some((e) => e.startsWith("RAY_AUTH_TOKEN="))) {
            reportViolation(`${describe(c)}: RAY_AUTH_TOKEN is set in envs, visible to docker inspect. Use ray.auth: token.`);
        }
        if (!envs.includes("RAY_AUTH_MODE=token") || !envs.some((e) => e.startsWith("RAY_AUTH_TOKEN_PATH="))) {
            reportViolation(`${describe(c)}: Ray runs without token authentication. Set ray.auth: token (the default).`);
        }
    },
};
