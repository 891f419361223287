declare module "node:test" {
  export function test(name: string, fn: () => void | Promise<void>): void;
}
declare module "node:assert/strict" {
  const assert: {
    equal(a: unknown, b: unknown, msg?: string): void;
    deepEqual(a: unknown, b: unknown, msg?: string): void;
    ok(a: unknown, msg?: string): void;
    throws(fn: () => unknown, re?: RegExp): void;
  };
  export default assert;
}
declare module "node:fs" {
  export function readFileSync(path: URL | string, encoding: "utf-8"): string;
}
