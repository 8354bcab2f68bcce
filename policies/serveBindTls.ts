import { ResourceValidationPolicy } from "@pulumi/policy";
import { argv, findVllmFlag } from "./lib/commandLine";
import { UNKNOWN, describe, serveContainer } from "./lib/container";
import { isIPv4 } from "net";

/** Loopback: only processes on the head reach it (an ssh tunnel brings clients there). */
const LOOPBACK = (host: string) => host === "localhost" || host === "::1" || (isIPv4(host) && host.startsWith("127."));

export const serveBindTls: ResourceValidationPolicy = {
    name: "serve-bind-needs-tls",
    description:
        "The vLLM API listens over HTTPS (--ssl-certfile and --ssl-keyfile; serve.tls) whenever it binds to anything " +
        "but loopback or the head's own fabric IP (VLLM_HOST_IP): over plain HTTP every request carries the bearer key " +
        "across the management network in clear, for anyone on that network to read and replay. Headless ranks of the " +
        "native backend serve no API and are not concerned.",
    enforcementLevel: "mandatory",
    severity: "critical",
    validateResource: (args, reportViolation) => {
        const c = serveContainer(args);
        if (c === undefined) return;
        const words = argv(c);
        if (words === UNKNOWN || words === undefined || words.includes("--headless") || words.includes(UNKNOWN)) return;
        if (!words.includes("serve")) return;
        const host = findVllmFlag(words, "--host");
        if (host.kind === "unknown") return;
        // vLLM without --host listens on every interface
        const bind = host.kind === "value" ? host.value : "every interface";
        if (host.kind === "value" && LOOPBACK(bind)) return;
        const envs = Array.isArray(c.envs) ? c.envs : [];
        const fabric = envs.find((e): e is string => e !== UNKNOWN && e.startsWith("VLLM_HOST_IP="))?.slice("VLLM_HOST_IP=".length);
        if (host.kind === "value" && fabric !== undefined && bind === fabric) return;
        const cert = findVllmFlag(words, "--ssl-certfile");
        const key = findVllmFlag(words, "--ssl-keyfile");
        if (cert.kind === "unknown" || key.kind === "unknown") return;
        if (cert.kind === "value" && key.kind === "value") return;
        reportViolation(
            `${describe(c)}: the API listens on ${bind === "0.0.0.0" ? "every interface (0.0.0.0)" : bind} over plain HTTP, ` +
                "so every request's bearer key crosses the network in clear. Set serve.tls (the certificate and key, as files or as secret config), or bind " +
                "serve.host to 127.0.0.1 (reach it through an ssh tunnel) or the head's fabric IP.",
        );
    },
};
