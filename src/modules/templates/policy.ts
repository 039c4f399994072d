import { Catalog, SHIPPED_CATALOG } from './catalog.js';

/**
 * The template catalog in force: the shipped entries, then those of `extraFile`
 * (`--template-catalog`; empty: none). Every entry is checked: a bad one throws CatalogError.
 */
export const templateCatalog = (extraFile: string): Catalog => Catalog.load([SHIPPED_CATALOG, ...(extraFile === '' ? [] : [extraFile])]);
