// A real identity provider for the team-server tests (tests/idp_server.py): panva's certified oidc-provider on
// 127.0.0.1, issuing RFC 9068 JWT access tokens for the resource a client names (RFC 8707). Its clients stand for
// users: each one's client-credentials tokens carry sub = its id. A client that registers itself (RFC 7591) logs a
// user in through the authorization-code flow with PKCE: its dev login page takes any user name. A user's token (the
// configured clients', a logged-in user's) carries groups: ["ba-analysts"]; a self-registered client's own
// (client credentials) carries none. IDP_ID_TOKEN_CLIENT: a confidential client of that id (a URL: the server's
// audience) whose ID tokens the tests present as access tokens.
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
const clients = [
  user("alice", "ba-mcp other"), user("bob", "ba-mcp other"), user("carol", "other"), user("brief", "ba-mcp"),
  user("opaque", "ba-mcp"),  // its tokens are opaque: the server asks the introspection endpoint
  { ...user("ba-mcp-server", "other"), grant_types: [], token_endpoint_auth_method: "client_secret_basic" },
];
const configured = new Set(clients.map((c) => c.client_id));
if (process.env.IDP_ID_TOKEN_CLIENT) {
  clients.push({
    ...user(process.env.IDP_ID_TOKEN_CLIENT, "openid"), client_secret: "id-token-secret",
    grant_types: ["authorization_code"], response_types: ["code"], redirect_uris: ["http://127.0.0.1:33418/callback"],
  });
}
const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients,
  jwks: { keys: [key] },
  // offline_access makes refresh_token a grant type clients may register: Claude's and the MCP SDK's registration
  // ask for it, and a provider without it refuses them (invalid_client_metadata)
  scopes: ["openid", "offline_access", "ba-mcp", "other"],
  extraTokenClaims: (ctx, token) => (token.accountId || configured.has(token.clientId) ? { groups: ["ba-analysts"] } : undefined),
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
