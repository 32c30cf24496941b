// A real identity provider for the team-server tests (tests/idp_server.py): panva's certified oidc-provider on
// 127.0.0.1, issuing RFC 9068 JWT access tokens for the resource a client names (RFC 8707). Its clients stand for
// users: each one's client-credentials tokens carry sub = its id. A client that registers itself (RFC 7591) logs a
// user in through the authorization-code flow with PKCE: its dev login page takes any user name.
//   node server.mjs PORT KEY_FILE
// KEY_FILE: the signing key (a private JWK, made here when missing): the tests rotate it by restarting with another.
import { generateKeyPairSync, randomUUID } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import Provider from "oidc-provider";

const [port, keyFile] = process.argv.slice(2);
if (!existsSync(keyFile)) {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  writeFileSync(keyFile, JSON.stringify({ ...privateKey.export({ format: "jwk" }), kid: randomUUID(), use: "sig", alg: "RS256" }));
}
const key = JSON.parse(readFileSync(keyFile, "utf-8"));
const user = (id, scope) => ({
  client_id: id, client_secret: `${id}-secret`, grant_types: ["client_credentials"], redirect_uris: [],
  response_types: [], scope, token_endpoint_auth_method: "client_secret_post",
});
const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [
    user("alice", "ba-mcp other"), user("bob", "ba-mcp other"), user("carol", "other"), user("brief", "ba-mcp"),
    user("opaque", "ba-mcp"),  // its tokens are opaque: the server asks the introspection endpoint
    { ...user("ba-mcp-server", "other"), grant_types: [], token_endpoint_auth_method: "client_secret_basic" },
  ],
  jwks: { keys: [key] },
  scopes: ["openid", "ba-mcp", "other"],
  features: {
    devInteractions: { enabled: true },  // its login and consent pages: the PKCE test fills them in
    registration: { enabled: true },  // dynamic client registration (RFC 7591), as MCP clients use
    clientCredentials: { enabled: true },
    introspection: { enabled: true, allowedPolicy: (ctx, client) => client.clientId === "ba-mcp-server" },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource, client) => ({
        scope: "ba-mcp other",
        audience: resource,
        accessTokenTTL: client.clientId === "brief" ? 2 : 600,  // "brief": tokens that expire at once
        accessTokenFormat: client.clientId === "opaque" ? "opaque" : "jwt",
        jwt: { sign: { alg: "RS256" } },
      }),
    },
  },
});
provider.proxy = false;
provider.listen(Number(port), "127.0.0.1", () => console.log(`ready ${port}`));
