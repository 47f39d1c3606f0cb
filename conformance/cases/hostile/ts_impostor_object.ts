const proto = Object.create(null);
const Fake = function Object() {};
Fake.prototype = proto;
Object.defineProperty(proto, 'constructor', { value: Fake });
const forged = Object.assign(Object.create(proto), { value: 1 });
try { await tools.echo(forged) } catch (e) { return e.message }
