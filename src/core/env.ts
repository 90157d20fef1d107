// Environment variables where there are any: Node's process.env, nothing in a browser page (no polyfill needed).
export function envVar(name: string): string | undefined {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
}
