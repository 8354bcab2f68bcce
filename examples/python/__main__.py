"""One VllmCluster from Python: the two simulated hosts of stacks/Pulumi.local.yaml, through the SDK that
`pulumi package add <checkout>/package` generates into sdks/ (docs/component.md)."""

import pulumi
import pulumi_vllm_cluster as vllm_cluster

config = pulumi.Config()
# Files on the machine running Pulumi, by absolute path.
tls_cert_file = config.get("tlsCertFile") or "/var/lib/vllm-cluster-testbed/tls/api-cert.pem"
tls_key_file = config.get("tlsKeyFile") or "/var/lib/vllm-cluster-testbed/tls/api-key.pem"
ssh_private_key_path = config.get("sshPrivateKeyPath") or "/var/lib/vllm-cluster-testbed/ssh/id_ed25519"
ssh_known_hosts_file = config.get("sshKnownHostsFile") or "/var/lib/vllm-cluster-testbed/ssh/known_hosts"


def cpu_env(core: int) -> dict:
    """vLLM's CPU build: 1 GiB of KV cache, each host's Ray worker on its own core."""
    return {"VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1", "OMP_PLACES": f"{{{core}}}", "OMP_PROC_BIND": "true"}


def read_secret_file(path: str) -> pulumi.Output[str]:
    with open(path, encoding="utf-8") as f:
        return pulumi.Output.secret(f.read())


cluster = vllm_cluster.VllmCluster(
    "vllm",
    nodes=[
        vllm_cluster.NodeOptionsArgs(
            name="spark-1",
            role="head",
            ssh_host="10.231.0.11",
            ssh_user="root",
            ssh_port=22,
            fabric_ip="10.232.0.11",
            fabric_interface="fabric0",
            gpus=1,
            gpu_runtime="none",
            unified_memory=False,
            env=cpu_env(0),
        ),
        vllm_cluster.NodeOptionsArgs(
            name="spark-2",
            ssh_host="10.231.0.12",
            ssh_user="root",
            ssh_port=22,
            fabric_ip="10.232.0.12",
            fabric_interface="fabric0",
            gpus=1,
            gpu_runtime="none",
            unified_memory=False,
            env=cpu_env(1),
        ),
    ],
    image=vllm_cluster.ImageOptionsArgs(ref="vllm-cluster-testbed:latest", source="host", source_node="spark-1"),
    model=vllm_cluster.ModelOptionsArgs(
        host_path="/var/lib/vllm-cluster-testbed/models/tiny-qwen2",
        container_path="/models/tiny-qwen2",
        served_name="tiny-qwen2",
    ),
    serve=vllm_cluster.ServeOptionsArgs(
        port=8000,
        host="0.0.0.0",
        # the certificate here; its private key apart, as the secret tls_key
        tls=vllm_cluster.ServeTlsOptionsArgs(cert_file=tls_cert_file),
        tensor_parallel_size=2,
        pipeline_parallel_size=1,
        gpu_memory_utilization=0.5,
        max_model_len=512,
        extra_args=["--dtype", "float32", "--enforce-eager"],
        shm_size="256m",
        ready_timeout_seconds=600,
        max_restarts=3,
    ),
    ray=vllm_cluster.RayOptionsArgs(
        gcs_port=6379,
        dashboard_port=8265,
        client_port=10001,
        object_store_memory_bytes=100000000,
        ready_timeout_seconds=180,
        shm_size="256m",
        max_restarts=3,
    ),
    ssh=vllm_cluster.SshOptionsArgs(private_key_path=ssh_private_key_path, known_hosts_file=ssh_known_hosts_file),
    monitoring=vllm_cluster.MonitoringOptionsArgs(image="vllm-cluster-monitoring:latest", source="host", scrape_interval_seconds=5),
    state_dir="/var/lib/vllm-cluster",
    backend="ray",
    # secrets go in as Inputs, never inside a section
    tls_key=read_secret_file(tls_key_file),
)

pulumi.export("endpoint", cluster.endpoint)
pulumi.export("servedModelName", cluster.served_model_name)
pulumi.export("apiKey", cluster.api_key)
pulumi.export("rayDashboard", cluster.ray_dashboard)
pulumi.export("nodes", cluster.nodes)
pulumi.export("clusterFingerprint", cluster.cluster_fingerprint)
pulumi.export("modelCommit", cluster.model_commit)
pulumi.export("monitoring", cluster.monitoring)
