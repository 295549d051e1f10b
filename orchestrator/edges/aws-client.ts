// What molt's own AWS clients share (EC2 for leaked instances, Elastic Load Balancing for
// retirement): the region, credentials from the run's environment or the SDK's default chain, each
// attempt and each call bounded by a deadline, and an error that names the IAM action molt's
// identity lacks when AWS answers AccessDenied.
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import type { StackConfig } from "../config";

/** Each call's whole deadline, retries included: an endpoint that stops answering must not hold the run. */
export const CALL_MS = 20_000;
const CONNECT_MS = 5_000;
const ATTEMPT_MS = 8_000;

export interface AwsClientSettings {
  region: string;
  /** Another endpoint (tests; VPC interface endpoints). */
  endpoint?: string;
  /**
   * The run's environment over the process's (the library's `env` option), as the engine sees
   * it: its AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN), else its AWS_PROFILE.
   */
  env?: Record<string, string | undefined>;
}

/**
 * The settings every AWS SDK v3 client of molt's takes (region, retries, deadlines, credentials,
 * endpoint). The SDK's default chain reads process.env only: keys or a profile the run's `env`
 * names are handed to it here (static keys first, as the engine's AWS provider takes them; the
 * S3 backend does the same), or a run given another identity than molt's process would act as
 * two identities.
 */
export function awsClientConfig(s: AwsClientSettings) {
  const env = s.env ?? process.env;
  const [accessKeyId, secretAccessKey] = [env.AWS_ACCESS_KEY_ID, env.AWS_SECRET_ACCESS_KEY];
  const keys = !!(accessKeyId && secretAccessKey);
  return {
    region: s.region,
    maxAttempts: 3,
    requestHandler: { connectionTimeout: CONNECT_MS, requestTimeout: ATTEMPT_MS, throwOnRequestTimeout: true },
    ...(accessKeyId && secretAccessKey
      ? {
          credentials: {
            accessKeyId,
            secretAccessKey,
            ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
          },
        }
      : {}),
    ...(!keys && env.AWS_PROFILE ? { profile: env.AWS_PROFILE } : {}),
    ...(s.endpoint ? { endpoint: s.endpoint } : {}),
  };
}

/**
 * The region of an AWS stack's own calls: molt:aws.region, else the stack file's aws:region
 * (the provider's), else AWS_REGION / AWS_DEFAULT_REGION.
 */
export function awsRegionOf(
  cfg: StackConfig,
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  const cloud = cfg.cloud;
  const own = cloud?.provider === "aws" ? (cloud as { aws: { region?: string } }).aws.region : undefined;
  return own ?? stackFileRegion(cfg.file) ?? (env.AWS_REGION || undefined) ?? (env.AWS_DEFAULT_REGION || undefined);
}

function stackFileRegion(file: string): string | undefined {
  const doc = parse(readFileSync(file, "utf8")) as { config?: Record<string, unknown> } | null;
  const region = doc?.config?.["aws:region"];
  return typeof region === "string" ? region : undefined;
}

/**
 * An AWS error as molt reports it: the action and what it was asked of, AWS's code and message;
 * for AccessDenied, the IAM action molt's identity needs and where the policy is.
 */
export function awsCallError(action: string, what: string, e: unknown): Error {
  const err = e as { name?: string; Code?: string; message?: string };
  const code = err.Code ?? err.name ?? "Error";
  const message = (err.message ?? String(e)).split("\n")[0];
  if (/^(AccessDenied|UnauthorizedOperation)/.test(code)) {
    return new Error(
      `${action} on ${what} was denied (${code}): molt's AWS identity needs the IAM action ${action} ` +
        `(docs/iam/aws-molt.json grants what molt calls); AWS said: ${message}`,
      { cause: e },
    );
  }
  return new Error(`${action} on ${what} failed: ${code}: ${message}`, { cause: e });
}

/** One AWS call, its error as awsCallError says. */
export async function awsCall<T>(action: string, what: string, send: () => Promise<T>): Promise<T> {
  try {
    return await send();
  } catch (e) {
    throw awsCallError(action, what, e);
  }
}
