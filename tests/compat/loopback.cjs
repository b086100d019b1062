// Preloaded (`node --require ./loopback.cjs server.js`) into a published server whose own CLI
// listens on every interface at a fixed port (server-everything 2025.1.14's `sse.js`: PORT or
// 3001): its HTTP server listens on 127.0.0.1 at a free port instead, and the port is printed
// on stderr as `listening <port>` once bound.
const net = require('node:net');

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const callback = typeof args[args.length - 1] === 'function' ? args[args.length - 1] : undefined;
  this.once('listening', () => process.stderr.write(`listening ${this.address().port}\n`));
  return callback ? listen.call(this, 0, '127.0.0.1', callback) : listen.call(this, 0, '127.0.0.1');
};
