import * as pulumi from "@pulumi/pulumi";
import { MANAGED_SERVE_FLAGS, loadConfig, validateConfig } from "../../infra/config";
import { deepClone, loadStackRaw, problems } from "./harness";

type Raw = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const base = (): Raw => deepClone(loadStackRaw("spark"));

describe("committed stacks validate", () => {
    test.each(["local", "local-native", "spark", "four-node"])("%s", (stack) => {
        expect(problems(loadStackRaw(stack))).toEqual([]);
    });

    test("backend defaults to ray; native.masterPort defaults to 29500", () => {
        const raw = base();
        delete raw.backend;
        const c = validateConfig(raw);
        expect(c.backend).toBe("ray");
        expect(c.native).toEqual({ masterPort: 29500 });
        expect(c.ray.auth).toBe("token");
        const n = validateConfig(loadStackRaw("local-native"));
        expect(n.backend).toBe("native");
        expect(n.native.masterPort).toBe(29500);
    });

    test("spark: typed values and defaults", () => {
        const c = validateConfig(base());
        expect(c.head.name).toBe("spark-1");
        expect(c.workers.map((w) => w.name)).toEqual(["spark-2"]);
        expect(c.totalGpus).toBe(2);
        expect(c.serve.port).toBe(8001);
        expect(c.serve.gpuMemoryUtilization).toBe(0.9);
        expect(c.image).toEqual({ ref: "hellohal2064/vllm-qwen3.5-gb10", source: "host", sourceNode: "spark-1", distribution: "chain" });
        expect(c.nodes[0].sshPort).toBe(22);
    });

    test("model.source names the node holding the model; unset, the model is taken as in place on every host", () => {
        expect(validateConfig(base()).model.source).toBeUndefined();
        const raw = base();
        raw.model.source = "spark-2";
        expect(validateConfig(raw).model.source).toBe("spark-2");
    });

    test("defaults: head is the first node, model container path from basename, ports", () => {
        const raw = base();
        delete raw.nodes[0].role;
        delete raw.model.containerPath;
        delete raw.ray;
        delete raw.image.sourceNode;
        const c = validateConfig(raw);
        expect(c.head.name).toBe("spark-1");
        expect(c.model.containerPath).toBe("/models/Qwen3.5-122B-A10B-FP8");
        expect(c.ray).toMatchObject({ gcsPort: 6379, dashboardPort: 8265, clientPort: 10001 });
        expect(c.image.sourceNode).toBe("spark-1");
    });
});

/** Each case: mutate a valid config, expect exactly these problems. */
const cases: [string, (r: Raw) => void, string[]][] = [
    ["missing nodes", (r) => delete r.nodes, ["nodes: is required (a list with at least one node)"]],
    ["empty nodes", (r) => (r.nodes = []), ["nodes: must be a non-empty list"]],
    [
        "required node keys",
        (r) => {
            delete r.nodes[1].sshHost;
            delete r.nodes[1].fabricIp;
            delete r.nodes[1].gpus;
        },
        ["nodes[1].sshHost: is required", "nodes[1].fabricIp: is required", "nodes[1].gpus: is required"],
    ],
    ["duplicate node name", (r) => (r.nodes[1].name = "spark-1"), ["nodes[1].name: spark-1 is used by nodes[0]"]],
    ["bad node name", (r) => (r.nodes[1].name = "Spark_2"), ['nodes[1].name: "Spark_2" is not a valid node name ([a-z0-9-])']],
    ["duplicate sshHost", (r) => (r.nodes[1].sshHost = "10.1.230.180"), ["nodes[1].sshHost: 10.1.230.180 is used by nodes[0]"]],
    [
        "malformed ssh host",
        (r) => (r.nodes[0].sshHost = "aurora@10.1.230.180"),
        ['nodes[0].sshHost: "aurora@10.1.230.180" is a malformed SSH host (expected an IPv4 address or DNS name)'],
    ],
    [
        "ssh host that looks like an IP but is not",
        (r) => (r.nodes[0].sshHost = "10.1.230.999"),
        ['nodes[0].sshHost: "10.1.230.999" is a malformed SSH host (expected an IPv4 address or DNS name)'],
    ],
    ["duplicate fabric IP", (r) => (r.nodes[1].fabricIp = "192.168.200.12"), ["nodes[1].fabricIp: 192.168.200.12 is used by nodes[0]"]],
    ["fabric IP not IPv4", (r) => (r.nodes[0].fabricIp = "192.168.200"), ['nodes[0].fabricIp: "192.168.200" is not a valid IPv4 address']],
    [
        "TP x PP != total GPUs",
        (r) => (r.serve.tensorParallelSize = 4),
        [
            "serve.tensorParallelSize: tensorParallelSize x pipelineParallelSize = 4 x 1 = 4 but the nodes offer 2 GPUs (TP x PP must equal total GPUs)",
        ],
    ],
    ["gpu util zero", (r) => (r.serve.gpuMemoryUtilization = 0), ["serve.gpuMemoryUtilization: 0 must be in (0, 1]"]],
    // the review's dangerous values: each passed validation before
    ["gpu util in hex", (r) => (r.serve.gpuMemoryUtilization = "0x1"), ['serve.gpuMemoryUtilization: "0x1" must be in (0, 1]']],
    ["gpu util in exponent form", (r) => (r.serve.gpuMemoryUtilization = "9e-1"), ['serve.gpuMemoryUtilization: "9e-1" must be in (0, 1]']],
    ["model at the root", (r) => (r.model.hostPath = "/"), ['model.hostPath: "/" is the root directory; choose a directory of its own']],
    [
        "model at /run (docker.sock in every container)",
        (r) => (r.model.hostPath = "/run"),
        ['model.hostPath: "/run" is /run, a system directory; choose a directory of its own'],
    ],
    [
        "model at /var (a parent of /var/run and the engine's state)",
        (r) => (r.model.hostPath = "/var"),
        ['model.hostPath: "/var" is a parent of /var/run, a system directory; choose a directory of its own'],
    ],
    [
        "model in a home directory",
        (r) => (r.model.hostPath = "/home/aurora"),
        ['model.hostPath: "/home/aurora" is a home directory (its ~/.ssh would go with it); choose a directory of its own'],
    ],
    [
        "model inside /root",
        (r) => (r.model.hostPath = "/root/models/qwen"),
        ['model.hostPath: "/root/models/qwen" is a home directory (its ~/.ssh would go with it); choose a directory of its own'],
    ],
    [
        "stateDir in /tmp",
        (r) => (r.stateDir = "/tmp"),
        ['stateDir: "/tmp" is inside /tmp, which every local user can write to (and a reboot may empty); choose a directory of its own'],
    ],
    [
        "stateDir in /dev/shm",
        (r) => (r.stateDir = "/dev/shm/vllm"),
        ['stateDir: "/dev/shm/vllm" is inside /dev, a system directory; choose a directory of its own'],
    ],
    [
        "stateDir inside the engine's state",
        (r) => (r.stateDir = "/var/lib/docker/vllm"),
        ['stateDir: "/var/lib/docker/vllm" is inside /var/lib/docker, the container engine\'s own state; choose a directory of its own'],
    ],
    [
        "model inside stateDir",
        (r) => ((r.stateDir = "/var/lib/vllm-cluster"), (r.model.hostPath = "/var/lib/vllm-cluster/models/qwen")),
        [
            "model.hostPath: /var/lib/vllm-cluster/models/qwen overlaps stateDir /var/lib/vllm-cluster; keep the model and the node state apart",
        ],
    ],
    [
        "a timeout of 2^53 seconds",
        (r) => (r.serve.readyTimeoutSeconds = 2 ** 53),
        ["serve.readyTimeoutSeconds: 9007199254740992 is out of range 1..604800 (seconds, at most a week)"],
    ],
    [
        "serve port in Ray's worker port range",
        (r) => (r.serve.port = 12000),
        [
            "serve.port: 12000 is in Ray's worker port range 10002-19999 (ray.minWorkerPort..maxWorkerPort) on every Ray host; " +
                "choose a port outside it",
        ],
    ],
    [
        "serve port on Ray's dashboard agent",
        (r) => (r.serve.port = 52365),
        ["ray.dashboardAgentPort: port 52365 clashes with serve.port on host spark-1"],
    ],
    [
        "a pinned Ray node port in the worker range, on every host",
        (r) => (r.ray.metricsExportPort = 12000),
        [
            "ray.metricsExportPort: 12000 is in Ray's worker port range 10002-19999 (ray.minWorkerPort..maxWorkerPort) on " +
                "every Ray host; choose a port outside it",
        ],
    ],
    [
        "a Ray node port on a worker host's sshd",
        (r) => (r.ray.objectManagerPort = 22),
        [
            "ray.objectManagerPort: port 22 clashes with nodes[0].sshPort on host spark-1",
            "ray.objectManagerPort: port 22 clashes with nodes[1].sshPort on host spark-2",
        ],
    ],
    [
        "an empty worker port range",
        (r) => ((r.ray.minWorkerPort = 20000), (r.ray.maxWorkerPort = 19999)),
        ["ray.maxWorkerPort: 19999 is below ray.minWorkerPort 20000"],
    ],
    [
        "one host spelled twice (case)",
        (r) => ((r.nodes[0].sshHost = "spark-a.lan"), (r.nodes[1].sshHost = "Spark-A.lan.")),
        ["nodes[1].sshHost: Spark-A.lan. is used by nodes[0]"],
    ],
    [
        "one host spelled twice (loopback)",
        (r) => ((r.nodes[0].sshHost = "localhost"), (r.nodes[1].sshHost = "127.0.0.1")),
        ["nodes[1].sshHost: 127.0.0.1 is used by nodes[0]"],
    ],
    ["gpu util above 1", (r) => (r.serve.gpuMemoryUtilization = 1.2), ["serve.gpuMemoryUtilization: 1.2 must be in (0, 1]"]],
    ["serve port out of range", (r) => (r.serve.port = 70000), ["serve.port: 70000 is out of range 1..65535 (TCP port)"]],
    ["ssh port out of range", (r) => (r.nodes[1].sshPort = 0), ["nodes[1].sshPort: 0 is out of range 1..65535 (TCP port)"]],
    ["serve port clashes with ray gcs", (r) => (r.serve.port = 6379), ["ray.gcsPort: port 6379 clashes with serve.port on host spark-1"]],
    [
        "dashboard clashes with client port",
        (r) => (r.ray.dashboardPort = 10001),
        ["ray.clientPort: port 10001 clashes with ray.dashboardPort on host spark-1"],
    ],
    [
        "ssh port clashes with serve port on the head",
        (r) => (r.nodes[0].sshPort = 8001),
        ["serve.port: port 8001 clashes with nodes[0].sshPort on host spark-1"],
    ],
    ["more than one head", (r) => (r.nodes[1].role = "head"), ["nodes[1].role: more than one head: nodes[0] is already the head"]],
    [
        "no head among nodes",
        (r) => {
            r.nodes[0].role = "worker";
            r.nodes[1].role = "worker";
        },
        ["nodes: no head node: set role: head on exactly one node"],
    ],
    ["invalid role", (r) => (r.nodes[1].role = "leader"), ['nodes[1].role: "leader" must be one of head, worker']],
    [
        "node env: bad name, managed names, multi-line value (values never echoed)",
        (r) =>
            (r.nodes[1].env = {
                "1BAD": "x",
                VLLM_HOST_IP: "10.0.0.1",
                VLLM_API_KEY: "sk-secret-in-config",
                DASHBOARD_METRIC_PORT: "30000",
                OK_ONE: "line1\nline2-secret",
            }),
        [
            "nodes[1].env.1BAD: is not a valid environment variable name",
            "nodes[1].env.VLLM_HOST_IP: is set by the program (or must never be configured) and cannot be overridden",
            "nodes[1].env.VLLM_API_KEY: is set by the program (or must never be configured) and cannot be overridden",
            "nodes[1].env.DASHBOARD_METRIC_PORT: is set by the program (or must never be configured) and cannot be overridden",
            "nodes[1].env.OK_ONE: must be a single-line string",
        ],
    ],
    ["node env not a map", (r) => (r.nodes[0].env = ["A=1"]), ["nodes[0].env: must be a map of environment variable names to values"]],
    ["missing image ref", (r) => delete r.image.ref, ["image.ref: is required"]],
    ["missing image section", (r) => delete r.image, ["image: is required", "image.ref: is required"]],
    ["missing model path", (r) => delete r.model.hostPath, ["model.hostPath: is required"]],
    [
        "relative model path",
        (r) => (r.model.hostPath = "models/x"),
        ['model.hostPath: "models/x" must be an absolute path without spaces or quotes'],
    ],
    ["missing served name", (r) => delete r.model.servedName, ["model.servedName: is required"]],
    [
        "unknown image source node",
        (r) => (r.image.sourceNode = "spark-9"),
        ['image.sourceNode: "spark-9" is not one of the nodes (spark-1, spark-2)'],
    ],
    [
        "unknown model source node",
        (r) => (r.model.source = "spark-9"),
        ['model.source: "spark-9" is not one of the nodes (spark-1, spark-2)'],
    ],
    ["model source not a string", (r) => (r.model.source = 2), ["model.source: must be a string"]],
    ["bad image source", (r) => (r.image.source = "s3"), ['image.source: "s3" must be one of host, local, registry']],
    ["bad gpu runtime", (r) => (r.nodes[0].gpuRuntime = "amd"), ['nodes[0].gpuRuntime: "amd" must be one of nvidia, none']],
    [
        "extraArgs duplicating --tensor-parallel-size",
        (r) => (r.serve.extraArgs = ["--enforce-eager", "--tensor-parallel-size", "2"]),
        ["serve.extraArgs[1]: --tensor-parallel-size is managed by the program; set it through its own key (value not shown)"],
    ],
    [
        "extraArgs with --api-key=value",
        (r) => (r.serve.extraArgs = ["--api-key=hunter2-super-secret"]),
        ["serve.extraArgs[0]: --api-key is managed by the program; set it through its own key (value not shown)"],
    ],
    ["unknown key (typo)", (r) => (r.nodes[0].fabricIP = r.nodes[0].fabricIp), ["nodes[0].fabricIP: unknown key"]],
    ["unknown backend", (r) => (r.backend = "slurm"), ['backend: "slurm" must be one of ray, native']],
    ["unknown Ray auth mode", (r) => (r.ray.auth = "none"), ['ray.auth: "none" must be one of token, disabled']],
    [
        "node env sets the Ray token",
        (r) => (r.nodes[0].env = { RAY_AUTH_TOKEN: "hunter2" }),
        ["nodes[0].env.RAY_AUTH_TOKEN: is set by the program (or must never be configured) and cannot be overridden"],
    ],
    [
        "native: master port clashes with serve on the head",
        (r) => {
            r.backend = "native";
            r.native = { masterPort: 8001 };
        },
        ["native.masterPort: port 8001 clashes with serve.port on host spark-1"],
    ],
    [
        "native: master port equal to the head's ssh port",
        (r) => {
            r.backend = "native";
            r.native = { masterPort: 22 };
        },
        ["native.masterPort: port 22 clashes with nodes[0].sshPort on host spark-1"],
    ],
    [
        "native: ray ports are ignored (not opened), so they cannot clash",
        (r) => {
            r.backend = "native";
            r.ray.gcsPort = 8001;
        },
        [],
    ],
    ["ray: the native master port is ignored (not opened)", (r) => (r.native = { masterPort: 8001 }), []],
    [
        "native: bad master port",
        (r) => (r.native = { masterPort: 70000 }),
        ["native.masterPort: 70000 is out of range 1..65535 (TCP port)"],
    ],
    ["native: unknown key", (r) => (r.native = { masterAddr: "10.0.0.1" }), ["native.masterAddr: unknown key"]],
    [
        "native: TP x PP must still equal the total GPUs",
        (r) => {
            r.backend = "native";
            r.serve.tensorParallelSize = 4;
        },
        [
            "serve.tensorParallelSize: tensorParallelSize x pipelineParallelSize = 4 x 1 = 4 but the nodes offer 2 GPUs (TP x PP must equal total GPUs)",
        ],
    ],
    [
        "extraArgs may not set a native multi-node flag",
        (r) => (r.serve.extraArgs = ["--node-rank=1", "--headless"]),
        [
            "serve.extraArgs[0]: --node-rank is managed by the program; set it through its own key (value not shown)",
            "serve.extraArgs[1]: --headless is managed by the program; set it through its own key (value not shown)",
        ],
    ],
    [
        "auto tool choice without parser",
        (r) => delete r.serve.toolCallParser,
        ["serve.enableAutoToolChoice: requires serve.toolCallParser"],
    ],
    ["missing ssh key path", (r) => delete r.ssh.privateKeyPath, ["ssh.privateKeyPath: is required"]],
    ["bad shm size", (r) => (r.serve.shmSize = "lots"), ['serve.shmSize: "lots" is not a valid size (e.g. 64g)']],
    ["non-integer gpus", (r) => (r.nodes[0].gpus = 1.5), ["nodes[0].gpus: 1.5 must be an integer"]],
];

describe("validation rules name the key path and the rule", () => {
    test.each(cases)("%s", (_title, mutate, expected) => {
        const raw = base();
        mutate(raw);
        expect(problems(raw)).toEqual(expected);
    });

    test("every problem is reported in one error", () => {
        const raw = base();
        raw.nodes[1].fabricIp = "192.168.200.12";
        raw.serve.gpuMemoryUtilization = 2;
        delete raw.model.servedName;
        expect(() => validateConfig(raw)).toThrow(/3 problem\(s\)/);
        expect(problems(raw)).toEqual([
            "nodes[1].fabricIp: 192.168.200.12 is used by nodes[0]",
            "model.servedName: is required",
            "serve.gpuMemoryUtilization: 2 must be in (0, 1]",
        ]);
    });

    test("extraArgs values never appear in errors", () => {
        const raw = base();
        raw.serve.extraArgs = ["--api-key", "hunter2-super-secret", "--api-key=hunter3-secret"];
        let msg = "";
        try {
            validateConfig(raw);
        } catch (e) {
            msg = (e as Error).message;
        }
        expect(msg).toContain("serve.extraArgs[0]");
        expect(msg).not.toContain("hunter");
    });

    test("every managed flag is rejected in extraArgs", () => {
        for (const flag of MANAGED_SERVE_FLAGS) {
            const raw = base();
            raw.serve.extraArgs = [`${flag}=1`];
            expect(problems(raw)).toContain(
                `serve.extraArgs[0]: ${flag} is managed by the program; set it through its own key (value not shown)`,
            );
        }
    });

    test.each([
        // the review's bypasses: vLLM's parser reads _ as - and argparse takes unique prefixes
        ["--api-ke", "x", "--api-key"],
        ["--api_key", "x", "--api-key"],
        ["--tensor-parallel", "1", "--tensor-parallel-size"],
        ["--tensor_parallel_size", "1", "--tensor-parallel-size"],
        ["--headl", "", "--headless"],
        ["--ho", "10.0.0.9", "--host"],
        ["-t", "1", "-tp"],
        ["--master_addr=10.0.0.9", "", "--master-addr"],
    ])("extraArgs %s is refused as the managed flag it would set", (flag, value, managed) => {
        const raw = base();
        raw.serve.extraArgs = value ? [flag, value] : [flag];
        const spelled = flag.split("=")[0].replace(/^--(.*)$/, (_m, rest: string) => `--${rest.replace(/_/g, "-")}`);
        expect(problems(raw)).toEqual([
            spelled === managed
                ? `serve.extraArgs[0]: ${managed} is managed by the program; set it through its own key (value not shown)`
                : `serve.extraArgs[0]: ${spelled} would set ${managed} (vLLM reads _ as - and takes any unambiguous prefix), ` +
                  "which is managed by the program; set it through its own key (value not shown)",
        ]);
    });

    test("extraArgs --config (a file of serve arguments) and -- (end of options) are refused; other flags pass", () => {
        const raw = base();
        raw.serve.extraArgs = ["--config", "f.yaml", "--", "--enforce-eager", "--max-num-seqs", "4", "-O3", "--kv-cache-dtype=auto"];
        expect(problems(raw)).toEqual([
            "serve.extraArgs[0]: --config (a file of serve arguments) is managed by the program; set it through its own key (value not shown)",
            "serve.extraArgs[2]: -- (the end of options) is managed by the program; set it through its own key (value not shown)",
        ]);
    });

    test("non-object config", () => {
        expect(problems(undefined)).toEqual(
            expect.arrayContaining(["nodes: is required (a list with at least one node)", "image: is required"]),
        );
    });
});

/** Behaviour the zod schema makes explicit: each case mutates a valid config and expects exactly these problems. */
const schemaCases: [string, (r: Raw) => void, string[]][] = [
    [
        "a required section of the wrong type also lists its required keys",
        (r) => (r.serve = "fast"),
        ["serve: must be an object", "serve.tensorParallelSize: is required"],
    ],
    ["an optional section of the wrong type", (r) => (r.ray = 5), ["ray: must be an object"]],
    [
        "an image distribution that does not exist",
        (r) => (r.image.distribution = "star"),
        ['image.distribution: "star" must be one of chain, relay'],
    ],
    ["nodes of the wrong type are reported once", (r) => (r.nodes = ""), ["nodes: must be a non-empty list"]],
    [
        "memory sizes that are not sizes, or too small for a container, are named",
        (r) => {
            r.memoryGuard = { limit: "12x", minAvailable: "4 g", reserve: -1, checkSeconds: 0, floor: "1g" };
            r.serve.memoryLimit = "1m";
        },
        [
            'serve.memoryLimit: "1m" is below the smallest allowed, 64m',
            'memoryGuard.limit: "12x" is not a size such as 512m or 64g',
            'memoryGuard.reserve: "-1" is not a size such as 512m or 64g',
            'memoryGuard.minAvailable: "4 g" is not a size such as 512m or 64g',
            "memoryGuard.checkSeconds: 0 is out of range 1..60",
            "memoryGuard.floor: unknown key",
        ],
    ],
    [
        "a list item of the wrong type is reported once",
        (r) => (r.nodes[0].rdmaDevices = [[]]),
        ["nodes[0].rdmaDevices[0]: must be a non-empty string"],
    ],
    ["null means unset: the default applies", (r) => (r.ray.gcsPort = null), []],
    ["an unknown key is reported even when null", (r) => (r.nodes[0].bogus = null), ["nodes[0].bogus: unknown key"]],
    [
        "several unknown keys in one section: one line each",
        (r) => {
            r.image.tag = "latest";
            r.image.digest = "sha256:0";
        },
        ["image.tag: unknown key", "image.digest: unknown key"],
    ],
    [
        "a node that is not an object keeps the other nodes' indices",
        (r) => {
            r.nodes.push(deepClone(r.nodes[1]));
            r.nodes[0] = "spark-1";
        },
        [
            "nodes[0]: must be an object",
            "nodes[2].name: spark-2 is used by nodes[1]",
            "nodes[2].sshHost: 10.1.230.181 is used by nodes[1]",
            "nodes[2].fabricIp: 192.168.200.13 is used by nodes[1]",
        ],
    ],
    [
        "a malformed node name is not reported again by image.sourceNode",
        (r) => (r.nodes[0].name = "Spark_1"),
        ['nodes[0].name: "Spark_1" is not a valid node name ([a-z0-9-])'],
    ],
    [
        "a malformed node name is not reported again by model.source",
        (r) => {
            r.model.source = "spark-1";
            r.nodes[0].name = "Spark_1";
        },
        ['nodes[0].name: "Spark_1" is not a valid node name ([a-z0-9-])'],
    ],
    [
        "an invalid ssh port takes no part in the port clash check",
        (r) => {
            r.backend = "native";
            r.native = { masterPort: 22 };
            r.nodes[0].sshPort = 0;
        },
        ["nodes[0].sshPort: 0 is out of range 1..65535 (TCP port)"],
    ],
    [
        "a malformed tool call parser is not reported again as missing",
        (r) => (r.serve.toolCallParser = "qwen3 coder"),
        ['serve.toolCallParser: "qwen3 coder" is not a valid parser name'],
    ],
    [
        "a fraction written as a string is shown as written",
        (r) => (r.serve.gpuMemoryUtilization = "2"),
        ['serve.gpuMemoryUtilization: "2" must be in (0, 1]'],
    ],
];

describe("schema details", () => {
    test.each(schemaCases)("%s", (_title, mutate, expected) => {
        const raw = base();
        mutate(raw);
        expect(problems(raw)).toEqual(expected);
    });

    test("the string spellings `pulumi config set` produces are read as numbers and flags", () => {
        const raw = base();
        Object.assign(raw.serve, { port: "8002", gpuMemoryUtilization: "0.5", trustRemoteCode: "false", maxModelLen: "" + 4096 });
        raw.nodes[1].env = { OMP_NUM_THREADS: 8, NCCL_DEBUG: "INFO", VERBOSE: true };
        const c = validateConfig(raw);
        expect(c.serve).toMatchObject({ port: 8002, gpuMemoryUtilization: 0.5, trustRemoteCode: false, maxModelLen: 4096 });
        expect(c.nodes[1].env).toEqual({ OMP_NUM_THREADS: "8", NCCL_DEBUG: "INFO", VERBOSE: "true" });
    });

    test("exactly one node is the head; image.sourceNode is dropped unless source=host", () => {
        const raw = base();
        delete raw.nodes[0].role;
        raw.nodes[1].role = "head";
        raw.image = { ref: "vllm/vllm-openai:v0.11.0", source: "registry" };
        const c = validateConfig(raw);
        expect(c.nodes.map((n) => n.role)).toEqual(["worker", "head"]);
        expect(c.head.name).toBe("spark-2");
        expect(c.image.sourceNode).toBeUndefined();
    });
});

describe("loadConfig", () => {
    const setStackConfig = (raw: Raw) =>
        pulumi.runtime.setAllConfig(
            Object.fromEntries(Object.entries(raw).map(([k, v]) => [`vllm-cluster:${k}`, typeof v === "string" ? v : JSON.stringify(v)])),
        );

    test("reads the namespace and validates it", () => {
        setStackConfig(base());
        expect(loadConfig()).toEqual(validateConfig(base()));
    });

    test("a misspelt top-level key is reported, not ignored", () => {
        const raw = base();
        raw.backnd = "native";
        setStackConfig(raw);
        expect(() => loadConfig()).toThrow("invalid vllm-cluster stack config (1 problem(s)):\n  - backnd: unknown key");
    });

    test("a structured key that is not JSON is reported with the other problems", () => {
        const raw = base();
        raw.ssh = "~/.ssh/id_ed25519";
        raw.serve.port = 0;
        setStackConfig(raw);
        expect(() => loadConfig()).toThrow(
            "invalid vllm-cluster stack config (4 problem(s)):\n" +
                "  - serve.port: 0 is out of range 1..65535 (TCP port)\n" +
                "  - ssh: must be an object\n" +
                "  - ssh.privateKeyPath: is required\n" +
                "  - ssh.knownHostsFile: is required",
        );
    });
});
