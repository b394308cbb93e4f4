// A mock OpenID Connect provider on loopback for the browser tests (oauth2-mock-server):
// discovery, a JWKS with one RS256 key made at start, an authorization endpoint that signs
// the person in at once (PKCE, state and nonce honoured), and a token endpoint issuing ID tokens.
//
// Usage: node oidc-provider.mjs PORT FIXTURE.oidc...
// Each NAME.oidc fixture is JSON: {"clientId": "...", "sub": "alice", "groups": ["finance"]}: the ID tokens
// issued to that client name that principal and those groups. Prints `ready ISSUER` once it listens;
// stops on SIGTERM or SIGINT.

import { readFileSync } from 'node:fs';
import { OAuth2Server } from 'oauth2-mock-server';

const [port, ...fixtures] = process.argv.slice(2);
if (!port) {
  console.error('usage: node oidc-provider.mjs PORT FIXTURE.oidc...');
  process.exit(2);
}
const clients = new Map(
  fixtures.map((path) => {
    const client = JSON.parse(readFileSync(path, 'utf8'));
    return [client.clientId, client];
  }),
);

const server = new OAuth2Server();
await server.issuer.keys.generate('RS256');
// The issuer names 127.0.0.1 (not `localhost`, which may resolve to ::1), as `--oidc-issuer` does.
server.issuer.url = `http://127.0.0.1:${port}`;

// The client of a token request: HTTP Basic, else the body's client_id.
function clientOf(req) {
  const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
  if (basic) return decodeURIComponent(Buffer.from(basic, 'base64').toString().split(':')[0]);
  return req.body?.client_id;
}

// ID tokens (and access tokens) name the fixture's principal instead of the mock's `johndoe`.
server.service.on('beforeTokenSigning', (token, req) => {
  const client = clients.get(clientOf(req));
  if (!client) return;
  token.payload.sub = client.sub;
  if (client.groups) token.payload.groups = client.groups;
});

await server.start(Number(port), '127.0.0.1');
console.log(`ready ${server.issuer.url}`);

const stop = async () => {
  await server.stop().catch(() => {});
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
