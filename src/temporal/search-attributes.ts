import type { ConnectionLike } from '@temporalio/client';
import proto from '@temporalio/proto';
import { SEARCH_ATTRIBUTES } from '../../workflows/search-attributes.ts';

/**
 * Registers the project's custom search attributes on the namespace if missing
 * (the dev server registers them from its flags; a cluster gets them here).
 */
export async function ensureSearchAttributes(connection: Pick<ConnectionLike, 'operatorService'>, namespace: string): Promise<string[]> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const known = new Set(Object.keys(existing.customAttributes ?? {}));
  const missing = SEARCH_ATTRIBUTES.filter((key) => !known.has(key.name));
  if (missing.length > 0) {
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(
        missing.map((key) => [key.name, proto.temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD]),
      ),
    });
  }
  return missing.map((key) => key.name);
}
