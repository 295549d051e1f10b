// Presentation: what one observed world says about each node, for events, `plan` and `status`.
import type { NodeView } from "./events";
import type { World } from "./core/model";
import { agreedLeader, isHealthyVoter, isOutdated, kubeProblem, memberOfNode } from "./core/plan";

export function nodeViews(s: World): NodeView[] {
  const leader = s.etcd ? agreedLeader(s) : undefined;
  return s.nodes.map((n) => {
    const addr = s.endpoints.find((e) => e.name === n.name)?.privateAddress;
    const m = s.etcd ? memberOfNode(s.etcd.members, n, addr) : undefined;
    const st = s.etcd?.status[n.name];
    const k = s.kube?.nodes.find((x) => x.name === n.name);
    const apiserverVersion = s.kube?.components[n.name]?.apiserver.version;
    return {
      name: n.name,
      image: n.image,
      ...(n.kubernetesVersion ? { kubernetesVersion: n.kubernetesVersion } : {}),
      generation: n.generation,
      outdated: isOutdated(n, s.intent, s.certificates),
      ...(s.kube
        ? {
            kube: {
              nodeReady: k?.ready ?? false,
              cordoned: k?.unschedulable ?? false,
              ...(apiserverVersion ? { apiserverVersion } : {}),
              healthy: kubeProblem(s, n.name) === undefined,
            },
          }
        : {}),
      ...(m
        ? {
            member: {
              id: m.id,
              learner: m.isLearner,
              leader: m.id === leader,
              healthy: isHealthyVoter(s, n.name, leader),
              ...(st?.ok ? { appliedIndex: st.status.raftAppliedIndex.toString() } : {}),
            },
          }
        : {}),
    };
  });
}

/** Is the node a healthy voter with (when the intent runs Kubernetes) a healthy control plane? */
export function isHealthyNode(views: NodeView[], node: string, kubernetes: boolean): boolean {
  const v = views.find((x) => x.name === node);
  return !!v?.member?.healthy && !v.member.learner && (!kubernetes || !!v.kube?.healthy);
}
