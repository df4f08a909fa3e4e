// node-redlock acquire + release cycles per second against one Redis node.
// usage: node redlock_bench.js PORT SECONDS
const Redis = require("ioredis");
const Redlock = require("redlock").default;

async function main() {
  const port = Number(process.argv[2]);
  const seconds = Number(process.argv[3] || 5);
  const client = new Redis({ host: "127.0.0.1", port });
  const redlock = new Redlock([client], { retryCount: 0 });
  let cycles = 0;
  const start = process.hrtime.bigint();
  const limit = BigInt(Math.round(seconds * 1e9));
  while (process.hrtime.bigint() - start < limit) {
    const lock = await redlock.acquire(["redlock-bench"], 10000);
    await lock.release();
    cycles++;
  }
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(`node_redlock ${Math.round(cycles / elapsed)}`);
  client.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
