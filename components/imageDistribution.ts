import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import type { ImageConfig, ImageSource } from "../infra/config";
import type { ResolvedBuild } from "../infra/imageBuild";
import { ImageOrigin, imageEnsureScript, imageInspectScript, imageOrigin } from "../infra/builders/image";
import { ImageChain } from "../infra/providers/imageChain";
import { ImagePresence } from "../infra/providers/imagePresence";
import { SparkNode } from "./sparkNode";

export interface ImageDistributionArgs {
    /** Image reference as configured (tag or digest). */
    ref: string;
    /** host: already on `sourceNode`; local: on the operator's docker engine; registry: each host pulls. */
    source: ImageSource;
    /** Node holding the image when source is host. */
    sourceNode?: string;
    /** chain (default): one stream that every host loads and forwards at once; relay: one stream per host. */
    distribution?: ImageConfig["distribution"];
    /** What the chain sends: only the layers some receiving host lacks (missing, default), or the whole image. */
    layers?: "missing" | "all";
    /**
     * Build the image on the source node (source=host) from this context instead of finding it there: the Docker
     * provider's Image, through that node's own ssh:// engine connection, tagged `ref`, never pushed anywhere.
     */
    build?: ResolvedBuild;
    /** Every node that must run the image. */
    nodes: SparkNode[];
    /**
     * What must pass before any image is copied or checked: every host's preflight. A failed preflight (a port
     * taken, a wrong fabric IP) then ends `up` in the seconds the preflights take, before a 25 GB copy starts.
     */
    after: pulumi.Input<pulumi.Resource>[];
}

/**
 * Makes the image present on every host and exposes the image ID per host; containers take that ID as their
 * image, so a changed image replaces exactly the containers on hosts whose ID changed. Hosts are independent
 * resources and copy in parallel; with source=host the source host's image is the expected one everywhere else (by ID
 * where both hosts use the classic image store, else by layers, platform and run config: infra/builders/image.ts).
 * With distribution=chain one ImageChain resource first streams the image along all hosts that lack it (each loads
 * and forwards at once), so the per-host resources find it present and only verify its ID and architecture; the
 * source's own check does not wait for the copy, so whatever runs there (the Ray head) starts meanwhile. Nothing is
 * copied or checked before every host's preflight has passed (`after`).
 */
export class ImageDistribution extends pulumi.ComponentResource {
    /** Image ID by node name. */
    public readonly imageIds: Record<string, pulumi.Output<string>>;

    constructor(name: string, args: ImageDistributionArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:ImageDistribution", name, {}, opts);

        let origin: ImageOrigin;
        try {
            origin = imageOrigin(
                args.source,
                args.sourceNode,
                args.nodes.map((n) => ({ name: n.node.name, ssh: n.ssh })),
            );
        } catch (e) {
            throw new Error(`${name}: ${(e as Error).message}`);
        }
        const sourceNode = origin.kind === "host" ? args.nodes.find((n) => n.node.name === args.sourceNode) : undefined;

        const built = this.build(name, args, sourceNode);
        const chain = this.chain(name, args, origin, sourceNode, built);
        const presence = (n: SparkNode, expectedImage?: pulumi.Input<string>) =>
            new ImagePresence(
                `${name}-${n.node.name}`,
                {
                    node: n.node.name,
                    ref: args.ref,
                    ensureScript: imageEnsureScript(origin, n.ssh, n.node.name, args.ref),
                    inspectScript: imageInspectScript(n.ssh, args.ref),
                    expectedImage,
                    hostArch: n.arch,
                    built: n === sourceNode ? built?.repoDigest : undefined,
                },
                // the source already holds the image: its check (and the Ray head behind it) does not wait for the copy
                { parent: this, dependsOn: [...args.after, ...(chain && n !== sourceNode ? [chain] : []), ...(built ? [built] : [])] },
            );

        const ids: Record<string, pulumi.Output<string>> = {};
        const fromSource = sourceNode ? presence(sourceNode) : undefined;
        if (sourceNode && fromSource) {
            ids[sourceNode.node.name] = fromSource.imageId;
        }
        for (const n of args.nodes) {
            if (n !== sourceNode) {
                ids[n.node.name] = presence(n, fromSource?.image).imageId;
            }
        }
        this.imageIds = ids;

        this.registerOutputs({ imageIds: this.imageIds });
    }

    /**
     * image.build: the Docker provider's Image on the source node's engine (its ssh:// provider). Its context digest
     * (the files, .dockerignore applied) and args are its inputs, so it rebuilds only when they change; it never
     * builds during a preview, which shows the update instead. Its ID (repoDigest, with nothing pushed) reaches the
     * source's presence check and the chain, so a new build is copied and replaces what uses the image.
     */
    private build(name: string, args: ImageDistributionArgs, sourceNode?: SparkNode): docker.Image | undefined {
        if (!args.build) {
            return undefined;
        }
        if (!sourceNode) {
            throw new Error(`${name}: image.build needs image.source=host (the image is built on image.sourceNode)`);
        }
        return new docker.Image(
            `${name}-build`,
            {
                imageName: args.ref,
                skipPush: true,
                buildOnPreview: false,
                // RUN steps use the host's network, as every container of the cluster does: an engine without
                // its default bridge (Docker's `"bridge": "none"`) builds too
                build: { context: args.build.context, dockerfile: args.build.dockerfile, args: args.build.args, network: "host" },
            },
            { parent: this, provider: sourceNode.provider, dependsOn: args.after },
        );
    }

    /** The chain copy to every host but the source, unless distribution=relay, a registry, or nothing to copy to. */
    private chain(
        name: string,
        args: ImageDistributionArgs,
        origin: ImageOrigin,
        sourceNode?: SparkNode,
        built?: docker.Image,
    ): ImageChain | undefined {
        const members = args.nodes.filter((n) => n !== sourceNode);
        if ((args.distribution ?? "chain") !== "chain" || origin.kind === "registry" || members.length === 0) {
            return undefined;
        }
        return new ImageChain(
            `${name}-chain`,
            {
                ref: args.ref,
                source: origin.kind === "host" ? { kind: "host", node: origin.node, target: origin.target } : { kind: "local" },
                members: members.map((n) => n.member),
                layers: args.layers ?? "missing",
                built: built?.repoDigest,
            },
            { parent: this, dependsOn: [...args.after, ...(built ? [built] : [])] },
        );
    }
}
