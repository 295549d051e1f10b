// The azblob:// backend URL as molt's object store reads it: the engine's driver
// (gocloud.dev/blob/azureblob) resolves the account, endpoint and credential from the URL's
// parameters and the AZURE_STORAGE_* variables; molt resolves them the same way, so its lease
// lives in the container that holds the state, and it refuses what the engine refuses.
import * as assert from "node:assert/strict";
import { parseAzblobUrl } from "../../orchestrator/backend/azblob";
import { BackendError } from "../../orchestrator/stack/driver";

describe("the azblob:// backend URL (molt's object store)", () => {
  // Every variable the driver reads, unset unless a row sets it (process.env never leaks in).
  const none = {
    AZURE_STORAGE_ACCOUNT: "",
    AZURE_STORAGE_KEY: "",
    AZURE_STORAGE_SAS_TOKEN: "",
    AZURE_STORAGE_CONNECTION_STRING: "",
    AZURE_STORAGEBLOB_CONNECTIONSTRING: "",
    AZURE_STORAGE_DOMAIN: "",
    AZURE_STORAGE_PROTOCOL: "",
    AZURE_STORAGE_IS_CDN: "",
    AZURE_STORAGE_IS_LOCAL_EMULATOR: "",
  };
  const acct = { AZURE_STORAGE_ACCOUNT: "acme" };
  const good: [string, string, Record<string, string>, Partial<ReturnType<typeof parseAzblobUrl>>][] = [
    [
      "a container in the public cloud, Entra ID credentials",
      "azblob://state",
      acct,
      { container: "state", prefix: "", serviceUrl: "https://acme.blob.core.windows.net", credential: "default" },
    ],
    ["a prefix", "azblob://state/teams/a", acct, { prefix: "teams/a/" }],
    ["gocloud's prefix parameter before the path", "azblob://state/b?prefix=p-", acct, { prefix: "p-b/" }],
    [
      "storage_account in the URL",
      "azblob://state?storage_account=other",
      {},
      { account: "other", serviceUrl: "https://other.blob.core.windows.net" },
    ],
    [
      "a sovereign cloud's domain",
      "azblob://state?domain=blob.core.chinacloudapi.cn",
      acct,
      { serviceUrl: "https://acme.blob.core.chinacloudapi.cn" },
    ],
    [
      "an emulator on loopback (account after the host)",
      "azblob://state?domain=127.0.0.1:10000&protocol=http",
      acct,
      { serviceUrl: "http://127.0.0.1:10000/acme" },
    ],
    [
      "localemu=true",
      "azblob://state?domain=azurite:10000&protocol=http&localemu=true",
      acct,
      { serviceUrl: "http://azurite:10000/acme" },
    ],
    [
      "a CDN (no account in the host)",
      "azblob://state?domain=cdn.example.com&cdn=1",
      acct,
      { serviceUrl: "https://cdn.example.com" },
    ],
    [
      "the domain and protocol variables",
      "azblob://state",
      { ...acct, AZURE_STORAGE_DOMAIN: "localhost:10000", AZURE_STORAGE_PROTOCOL: "http" },
      { serviceUrl: "http://localhost:10000/acme" },
    ],
    ["a shared key", "azblob://state", { ...acct, AZURE_STORAGE_KEY: "a2V5" }, { credential: "shared-key" }],
    [
      "a shared key needs the account variable, not storage_account",
      "azblob://state?storage_account=acme",
      { AZURE_STORAGE_KEY: "a2V5" },
      { credential: "default" },
    ],
    ["a SAS token", "azblob://state", { ...acct, AZURE_STORAGE_SAS_TOKEN: "sv=1&sig=x" }, { credential: "sas" }],
    [
      "a connection string names the account and protocol",
      "azblob://state",
      { AZURE_STORAGE_CONNECTION_STRING: "DefaultEndpointsProtocol=http;AccountName=csacct;AccountKey=a2V5" },
      { account: "csacct", serviceUrl: "http://csacct.blob.core.windows.net", credential: "connection-string" },
    ],
  ];
  for (const [name, url, env, want] of good)
    it(`reads ${name}`, () => {
      const got = parseAzblobUrl(url, { ...none, ...env });
      for (const [k, v] of Object.entries(want)) assert.deepEqual(got[k as keyof typeof got], v, k);
    });

  const bad: [string, string, Record<string, string>, RegExp][] = [
    ["no container", "azblob:///prefix", acct, /azblob:\/\/<container>/],
    ["not a container name", "azblob://State_1", acct, /State_1 is not an Azure container name/],
    [
      "an unknown parameter (the engine refuses it too)",
      "azblob://state?sig=s3cr3t",
      acct,
      /the Pulumi engine refuses the URL parameter sig/,
    ],
    ["a parameter given twice", "azblob://state?domain=a&domain=b", acct, /domain is given 2 times/],
    ["a localemu that is not a boolean", "azblob://state?localemu=yes", acct, /localemu=yes: write true or false/],
    ["a protocol other than http(s)", "azblob://state?protocol=ftp", acct, /protocol ftp: write http or https/],
    ["credentials in the URL", "azblob://acme:s3cr3t@state", acct, /carries no credentials/],
    ["no account anywhere", "azblob://state", {}, /no storage account is configured: set AZURE_STORAGE_ACCOUNT/],
  ];
  for (const [name, url, env, message] of bad)
    it(`refuses ${name}`, () =>
      assert.throws(
        () => parseAzblobUrl(url, { ...none, ...env }),
        (e: unknown) =>
          e instanceof BackendError && message.test((e as Error).message) && !/s3cr3t/.test((e as Error).message),
      ));
});
