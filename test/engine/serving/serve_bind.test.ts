// `credit-lens serve` on a port that is taken or an address this machine does not have: a user error that names the
// address and what to do (the CLI prints it without a stack trace and exits 2), found before the model is loaded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { isUserError } from '../../../src/engine/core/errors';
import { serve } from '../../../src/engine/serving/serve';

test('a taken port and an absent address are refused by name before any model is loaded', async () => {
  const busy = createServer();
  await new Promise<void>((ok) => busy.listen(0, '127.0.0.1', () => ok()));
  const port = (busy.address() as AddressInfo).port;
  try {
    // the model path does not exist either: the error is the port's, so the address was checked first
    const t0 = performance.now();
    await assert.rejects(serve({ spec: '/nonexistent/model', port, backend: 'wasm' }), (e: Error) => {
      assert.ok(isUserError(e), `a user error, got ${e.stack}`);
      assert.match(e.message, new RegExp(`serve: cannot listen on 127\\.0\\.0\\.1:${port}: port ${port} is taken`));
      assert.match((e as Error & { hint?: string }).hint ?? '', /--port with a free port/);
      return true;
    });
    assert.ok(performance.now() - t0 < 5000, 'refused at once');
  } finally {
    busy.close();
  }
  // 203.0.113.7 is TEST-NET-3 (RFC 5737): an address no machine here has
  await assert.rejects(
    serve({ spec: '/nonexistent/model', host: '203.0.113.7', port: 30999, backend: 'wasm' }),
    /203\.0\.113\.7 is not an address of this machine/,
  );
});
