// The AWS SDK clients molt itself calls (S3 for an s3:// backend, EC2 for leaked instances,
// Elastic Load Balancing for retirement), loaded when a stack first needs one, not when molt
// starts: the four packages and their shared core are about 60 MiB of a process's memory, which
// a lab, vSphere or Azure run never uses (bench goal 5; test/unit/lazy-sdks.test.ts holds it).
// The types come from the packages as usual (`import type` is erased).
import type * as Ec2 from "@aws-sdk/client-ec2";
import type * as ElbClassic from "@aws-sdk/client-elastic-load-balancing";
import type * as ElbV2 from "@aws-sdk/client-elastic-load-balancing-v2";
import type * as S3 from "@aws-sdk/client-s3";

/* eslint-disable @typescript-eslint/no-require-imports */
export const ec2Sdk = (): typeof Ec2 => require("@aws-sdk/client-ec2") as typeof Ec2;
export const elbV2Sdk = (): typeof ElbV2 => require("@aws-sdk/client-elastic-load-balancing-v2") as typeof ElbV2;
export const elbClassicSdk = (): typeof ElbClassic =>
  require("@aws-sdk/client-elastic-load-balancing") as typeof ElbClassic;
export const s3Sdk = (): typeof S3 => require("@aws-sdk/client-s3") as typeof S3;
