// The s3:// backend URL as molt's lock store reads it: the parameters the engine's S3 driver
// reads (gocloud.dev s3blob) that matter for molt's own requests, and a clear refusal of
// anything else.
import * as assert from "node:assert/strict";
import { parseS3Url } from "../../orchestrator/backend/s3";
import { BackendError } from "../../orchestrator/stack/driver";

describe("the s3:// backend URL (molt's lock store)", () => {
  const good: [string, string, Partial<ReturnType<typeof parseS3Url>>][] = [
    ["a bucket", "s3://state", { bucket: "state", prefix: "", pathStyle: false }],
    ["a prefix", "s3://state/teams/a", { bucket: "state", prefix: "teams/a/" }],
    ["region", "s3://state?region=eu-central-1", { region: "eu-central-1" }],
    [
      "an S3-compatible endpoint, path style (gocloud v2 name)",
      "s3://state?endpoint=http://127.0.0.1:9000&use_path_style=true",
      { endpoint: "http://127.0.0.1:9000", pathStyle: true },
    ],
    ["the v1 name s3ForcePathStyle", "s3://state?s3ForcePathStyle=true", { pathStyle: true }],
    ["an endpoint without scheme: https", "s3://state?endpoint=minio:9000", { endpoint: "https://minio:9000" }],
    [
      "an endpoint without scheme and disableSSL: http",
      "s3://state?endpoint=minio:9000&disableSSL=true",
      { endpoint: "http://minio:9000" },
    ],
    ["engine-only parameters pass", "s3://state?awssdk=v2&request_checksum_calculation=when_required", {}],
  ];
  for (const [name, url, want] of good)
    it(`reads ${name}`, () => {
      const got = parseS3Url(url);
      for (const [k, v] of Object.entries(want)) assert.deepEqual(got[k as keyof typeof got], v, k);
    });

  const bad: [string, string, RegExp][] = [
    ["an unknown parameter", "s3://state?rolee=arn:aws:iam::1:role/x", /does not support the URL parameter rolee/],
    [
      "a path-style value that is not a boolean",
      "s3://state?use_path_style=yes",
      /use_path_style=yes: write true or false/,
    ],
    ["credentials in the URL", "s3://key:secret@state", /carries no credentials/],
    ["no bucket", "s3:///prefix", /s3:\/\/<bucket>/],
    ["an endpoint that is not a URL", "s3://state?endpoint=http://", /endpoint=http:\/\/ is not a URL/],
  ];
  for (const [name, url, message] of bad)
    it(`refuses ${name}`, () =>
      assert.throws(
        () => parseS3Url(url),
        (e: unknown) =>
          e instanceof BackendError && message.test((e as Error).message) && !/secret/.test((e as Error).message),
      ));
});
