// The config sections every cloud stack has (molt:ssh, molt:failureDomains, molt:bootstrap)
// and the zod helpers the providers' own sections are written with. Messages name what to
// write instead; orchestrator/config/index.ts prefixes each with its key.
import { z } from "zod";

export const SET_PRIVATE_KEY =
  "`npm run pulumi -- config set --stack <stack> --secret --path 'molt:ssh.privateKey' < <key file>`";

export const text = (what: string) => z.string({ message: what }).min(1, what);
export const count = (min: number, what: string) =>
  z.number({ message: what }).int("a whole number").min(min, `at least ${min}`);
export const stringMap = z.record(z.string(), z.string());
/** A message for a missing (or wrongly typed) value; zod's own for everything else. */
export const required = (message: string) => ({
  error: (i: { code: string }) => (i.code === "invalid_type" ? message : undefined),
});

/** The network add-on the example stacks pin: Flannel (VXLAN, pod network 10.244.0.0/16). */
export const DEFAULT_CNI_MANIFEST = "https://github.com/flannel-io/flannel/releases/download/v0.27.4/kube-flannel.yml";

/** Why a stack without a network add-on is refused (see bootstrapSchema's cniManifest). */
export const CNI_REQUIRED =
  "required on clouds: the network add-on `kubectl apply`d once after kubeadm init, such as " +
  `${DEFAULT_CNI_MANIFEST} (podSubnet 10.244.0.0/16; or your mirror of it); ` +
  "nodes stay NotReady without one and molt waits for Node Ready. " +
  'Write "none" only when the cluster gets it another way';

const bootstrapSchema = z
  .object(
    {
      controlPlaneEndpoint: text("host:port of the API load balancer, such as api.prod.example.com:6443"),
      install: z.discriminatedUnion(
        "source",
        [
          z.object({ source: z.literal("image") }).strict(),
          z.object({ source: z.literal("packages"), repository: z.string().optional() }).strict(),
        ],
        { message: "image (verify the binaries the image carries) or packages (install them from pkgs.k8s.io)" },
      ),
      clusterName: z.string().optional(),
      podSubnet: z.string().optional(),
      serviceSubnet: z.string().optional(),
      dnsDomain: z.string().optional(),
      apiServerCertSANs: z.array(z.string()).optional(),
      imageRepository: z.string().optional(),
      criSocket: z.string().optional(),
      cniManifest: z.string(required(CNI_REQUIRED)).min(1, CNI_REQUIRED),
      cloudProvider: z
        .literal("external", {
          message:
            "external (the kubelet waits for a cloud controller manager); in-tree cloud providers are gone since " +
            "Kubernetes 1.31. Leave it out for none",
        })
        .optional(),
      removeEtcdMemberOnReset: z.boolean().optional(),
      // kube-apiserver's --shutdown-delay-duration: covers the load balancer's health check.
      apiServerShutdownDelaySeconds: z.number().optional(),
    },
    required("required on clouds: controlPlaneEndpoint, install and the cluster settings (see stacks/Pulumi.aws.yaml)"),
  )
  .strict();

/** The sections every cloud provider shares. */
export const cloudCommonSections = {
  "molt:ssh": z.object(
    {
      user: z
        .string(
          required("required on clouds: the image's admin user that cloud-init creates (not root; molt uses sudo -n)"),
        )
        .refine(
          (u) => u !== "root",
          "not root: cloud images refuse root logins; use the image's admin user (molt uses sudo -n)",
        ),
      port: z.number().optional(),
      // Its form is checked with the other molt:ssh keys (orchestrator/config/index.ts); here only that it is there.
      privateKey: z
        .unknown()
        .refine((v) => v !== undefined, `required on clouds, as a Pulumi secret: ${SET_PRIVATE_KEY}`),
    },
    required("required on clouds: { user: <the image's admin user>, privateKey: <a Pulumi secret> }"),
  ),
  "molt:failureDomains": z
    .array(z.string().min(1))
    .refine((d) => new Set(d).size === d.length, "distinct names")
    .optional(),
  "molt:bootstrap": bootstrapSchema,
} as const;

export type CloudCommonSections = z.infer<z.ZodObject<typeof cloudCommonSections>>;
