// A form generated from a tool's JSON schema, for "Approve with edited arguments". Scalars get
// inputs; nested objects/arrays and anything unusual get a JSON textarea. The kernel
// re-validates whatever comes back, so this form only has to be convenient, not authoritative.
import { h } from "./dom";

type Schema = Record<string, any>;

export function resolveRef(schema: Schema, root: Schema): Schema {
  let s = schema;
  for (let i = 0; i < 8 && s && typeof s.$ref === "string"; i++) {
    const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(s.$ref);
    s = m ? root?.[m[1]]?.[m[2]] ?? {} : {};
  }
  if (s && Array.isArray(s.anyOf)) {
    const nonNull = s.anyOf.filter((x: Schema) => x?.type !== "null");
    if (nonNull.length === 1) return { ...resolveRef(nonNull[0], root), nullable: true };
  }
  return s ?? {};
}

export interface FieldReader {
  name: string;
  read(): unknown;
  /** Show (or clear, with "") the field's own validation message next to it. */
  mark(message: string): void;
}

export function fieldKind(s: Schema): "enum" | "boolean" | "integer" | "number" | "string" | "json" {
  if (Array.isArray(s.enum)) return "enum";
  if (s.type === "boolean" || s.type === "integer" || s.type === "number" || s.type === "string") return s.type;
  return "json";
}

/** Parse one field's raw input into the value to send; throws Error with a readable message. */
export function parseField(kind: ReturnType<typeof fieldKind>, raw: string | boolean, name: string, enumValues: unknown[] = []): unknown {
  switch (kind) {
    case "boolean":
      return Boolean(raw);
    case "integer":
    case "number": {
      const text = String(raw).trim();
      const n = Number(text);
      if (text === "" || !Number.isFinite(n) || (kind === "integer" && !Number.isInteger(n))) throw new Error(`${name}: expected ${kind === "integer" ? "an integer" : "a number"}`);
      return n;
    }
    case "enum": {
      const idx = Number(raw);
      return enumValues[idx];
    }
    case "string":
      return String(raw);
    default:
      try {
        return JSON.parse(String(raw));
      } catch {
        throw new Error(`${name}: not valid JSON`);
      }
  }
}

/** One error of the kernel's validation: pydantic's `loc` (field, then path inside it) and message. */
export interface FieldError {
  loc: (string | number)[];
  msg: string;
}

/** The kernel's errors as "path: message" lines, per form field (by the first `loc` part), and
 * the rest: errors with no `loc`, or for a field the form does not show. */
export function placeErrors(errors: FieldError[], fields: string[]): { byField: Map<string, string>; rest: string[] } {
  const byField = new Map<string, string>();
  const rest: string[] = [];
  for (const e of errors) {
    const loc = Array.isArray(e?.loc) ? e.loc : [];
    const line = `${loc.length ? loc.join(".") : "arguments"}: ${String(e?.msg ?? "invalid")}`;
    const field = loc.length ? String(loc[0]) : "";
    if (field && fields.includes(field)) byField.set(field, byField.has(field) ? `${byField.get(field)}\n${line}` : line);
    else rest.push(line);
  }
  return { byField, rest };
}

export interface SchemaForm {
  el: HTMLElement;
  read(): Record<string, unknown>;
  /** Mark each field with the kernel's errors for it (clearing the others); returns the
   * messages that belong to no field shown, for the prompt's general error line. */
  showErrors(errors: FieldError[]): string[];
}

export function schemaForm(schema: Schema | null | undefined, args: Record<string, unknown>): SchemaForm {
  const root = schema ?? {};
  const obj = resolveRef(root, root);
  const props: Record<string, Schema> = obj.properties ?? {};
  const names = Object.keys(props).length ? Object.keys(props) : Object.keys(args);
  const form = h("div", { class: "lfx-form" });
  const readers: FieldReader[] = [];
  for (const name of names) {
    const s = resolveRef(props[name] ?? {}, root);
    const kind = fieldKind(s);
    const value = args[name] ?? s.default;
    const label = h("label", { class: "lfx-form-row" }, h("span", { class: "lfx-key", text: `${name}${(obj.required ?? []).includes(name) ? " *" : ""}` }));
    if (s.description) label.title = String(s.description);
    let input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;
    if (kind === "boolean") {
      input = h("input", { type: "checkbox", name }) as HTMLInputElement;
      (input as HTMLInputElement).checked = Boolean(value);
    } else if (kind === "enum") {
      input = h("select", { name }) as HTMLSelectElement;
      (s.enum as unknown[]).forEach((opt, i) => {
        const o = h("option", { value: String(i), text: typeof opt === "string" ? opt : JSON.stringify(opt) }) as HTMLOptionElement;
        if (JSON.stringify(opt) === JSON.stringify(value)) o.selected = true;
        input.append(o);
      });
    } else if (kind === "json") {
      input = h("textarea", { name, rows: 3 }) as HTMLTextAreaElement;
      input.value = value === undefined ? "" : JSON.stringify(value, null, 1);
    } else {
      input = h("input", { type: kind === "string" ? "text" : "number", name, step: kind === "number" ? "any" : undefined }) as HTMLInputElement;
      input.value = value === undefined || value === null ? "" : String(value);
    }
    const fieldError = h("span", { class: "lfx-err lfx-field-error", role: "alert" });
    label.append(input, fieldError);
    form.append(label);
    const inp = input;
    readers.push({
      name,
      read: () => parseField(kind, kind === "boolean" ? (inp as HTMLInputElement).checked : inp.value, name, s.enum ?? []),
      mark(message: string) {
        fieldError.textContent = message;
        label.classList.toggle("lfx-invalid", !!message);
        if (message) inp.setAttribute("aria-invalid", "true");
        else inp.removeAttribute("aria-invalid");
      },
    });
  }
  return {
    el: form,
    /** The values; every invalid field is marked at the field, then the first error is thrown. */
    read() {
      const out: Record<string, unknown> = {};
      let first: Error | null = null;
      for (const r of readers) {
        try {
          out[r.name] = r.read();
          r.mark("");
        } catch (e) {
          r.mark((e as Error).message);
          first ??= e as Error;
        }
      }
      if (first) throw first;
      return out;
    },
    showErrors(errors: FieldError[]): string[] {
      const { byField, rest } = placeErrors(errors, readers.map((r) => r.name));
      for (const r of readers) r.mark(byField.get(r.name) ?? "");
      return rest;
    },
  };
}
