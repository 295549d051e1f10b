// The clouds' SDK packages, loaded when a program of that cloud runs, not when molt starts:
// @pulumi/azure-native alone is hundreds of modules and tens of MiB of a process's memory, which a
// lab or AWS rollout never uses (bench goal 5). The types come from the packages as usual.
import type * as Aws from "@pulumi/aws";
import type * as Azure from "@pulumi/azure-native";

/* eslint-disable @typescript-eslint/no-require-imports */
export const awsSdk = (): typeof Aws => require("@pulumi/aws") as typeof Aws;
export const azureSdk = (): typeof Azure => require("@pulumi/azure-native") as typeof Azure;
