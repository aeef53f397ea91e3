// A Node.js HTTPS client, as a user's script would be (tests/e2e).
//
// usage: node node_client.js https|fetch|tunnel URL [NAME=ENVVAR]...
//   https   https.get with the default agent: Node honours the proxy
//           variables only with NODE_USE_ENV_PROXY=1, and only from
//           v22.21 / v24.5 on; older Node connects directly.
//   fetch   the global fetch (undici): the same rule.
//   tunnel  what works on every Node: CONNECT through $HTTPS_PROXY by hand,
//           then TLS (NODE_EXTRA_CA_CERTS supplies the session CA).
// Each NAME=ENVVAR adds the header NAME with the value of $ENVVAR.
// Prints "STATUS n" then the body, or "ERROR code message" and exits 1.
'use strict';
const http = require('http');
const https = require('https');
const tls = require('tls');

const [mode, url, ...hdrArgs] = process.argv.slice(2);
const headers = {};
for (const a of hdrArgs) {
  const i = a.indexOf('=');
  headers[a.slice(0, i)] = process.env[a.slice(i + 1)] || '';
}

function fail(err) {
  console.log('ERROR ' + (err.code || err.cause?.code || err.name) + ' ' +
              (err.cause?.message || err.message));
  process.exit(1);
}

function done(status, body) {
  process.stdout.write('STATUS ' + status + '\n');
  process.stdout.write(body);
  process.exitCode = status < 400 ? 0 : 1;
}

function collect(res) {
  const parts = [];
  res.on('data', (d) => parts.push(d));
  res.on('end', () => done(res.statusCode, Buffer.concat(parts)));
  res.on('error', fail);
}

const timer = setTimeout(() => fail({code: 'TIMEOUT', message: 'no answer in 30 s'}), 30000);
timer.unref();

if (mode === 'https') {
  https.get(url, {headers}, collect).on('error', fail);
} else if (mode === 'fetch') {
  fetch(url, {headers})
      .then(async (res) => done(res.status, Buffer.from(await res.arrayBuffer())))
      .catch(fail);
} else if (mode === 'tunnel') {
  const target = new URL(url);
  const proxy = new URL(process.env.HTTPS_PROXY || process.env.https_proxy);
  const port = target.port || '443';
  const req = http.request({
    host: proxy.hostname, port: proxy.port, method: 'CONNECT',
    path: target.hostname + ':' + port, headers: {host: target.hostname + ':' + port},
  });
  req.on('connect', (res, socket) => {
    if (res.statusCode !== 200) {
      fail({code: 'CONNECT_' + res.statusCode, message: 'the proxy refused the tunnel'});
      return;
    }
    const agent = new https.Agent({keepAlive: false});
    agent.createConnection = () => tls.connect({socket, servername: target.hostname});
    https.get(url, {agent, headers}, collect).on('error', fail);
  });
  req.on('error', fail);
  req.end();
} else {
  fail({code: 'USAGE', message: 'unknown mode ' + mode});
}
