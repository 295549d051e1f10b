// The state guard: a compare-and-swap on the stack's state, for stacks whose lease lives in
// the cluster (molt:lock.in cluster; Pulumi Cloud and gs:// by default). Before the first
// node's etcd exists nothing holds such a stack, so two runners could each read an empty
// node list and each `up` a first node. Every `up` molt runs on such a stack declares this one
// resource with the token it read from the state (`expect`) and a fresh one (`token`), and
// every other resource depends on it: its update fails, before any other resource is
// touched, unless the state still holds the token this run read. The backend serialises
// updates (its update lock), so reading the stored token and writing the new one are one
// atomic step, and an `up` decided on a state another run changed since fails, changing
// nothing. Implementation: guard-impl.ts (loaded by the dynamic provider at run time).
import * as pulumi from "@pulumi/pulumi";
import { implementation } from "./dynamic";

export const GUARD_NAME = "molt-state-guard";

/** Targets it whether or not the state holds it yet (stack/targets.ts). */
export const GUARD_TARGET = `**::${GUARD_NAME}`;

export interface GuardInputs {
  /** The token this run read from the state ("" when the state holds no guard). */
  expect: string;
  /** The token this `up` writes. */
  token: string;
}

/** A guarded `up` ({ expect, token }), or "keep": declared unchanged (a hand-run preview). */
export type GuardMode = GuardInputs | "keep";

const guardProvider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: GuardInputs) {
    return implementation("infra/guard-impl").createGuard(inputs);
  },
  async diff(_id: string, olds: GuardInputs, news: GuardInputs) {
    return { changes: olds.token !== news.token };
  },
  async update(_id: string, olds: GuardInputs, news: GuardInputs) {
    return implementation("infra/guard-impl").updateGuard(olds, news);
  },
  async delete() {
    /* nothing outside the state */
  },
};

export class StateGuard extends pulumi.dynamic.Resource {
  declare readonly token: pulumi.Output<string>;
  constructor(inputs: GuardInputs, opts?: pulumi.CustomResourceOptions) {
    super(guardProvider, GUARD_NAME, inputs, opts, "molt", "StateGuard");
  }
}

/**
 * Declares the guard and makes every resource the program declares after it depend on it
 * (a stack transformation: the engine starts none of their steps before the guard's ends).
 */
export function declareGuard(mode: GuardMode): StateGuard {
  const guard =
    mode === "keep"
      ? new StateGuard({ expect: "", token: "" }, { ignoreChanges: ["expect", "token"] })
      : new StateGuard(mode);
  pulumi.runtime.registerStackTransformation((args) =>
    args.resource === guard
      ? undefined
      : { props: args.props, opts: pulumi.mergeOptions(args.opts, { dependsOn: [guard] }) },
  );
  return guard;
}
