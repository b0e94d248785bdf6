/**
 * The standard's vocabulary: model, constants, errors, datetimes, hashes and validation rules. Pure: no I/O.
 *
 * @module
 */
export * from './constants.js';
export * from './errors.js';
export * from './model.js';
export * from './datetime.js';
export * from './hash.js';
export * from './rules.js';
export * from './validate.js';
export { type ChildLink, checkLinkedDocument, childLinks, type LinkContext, sameUrl } from './validate-links.js';
export { encodePathSegment, isPathChar, percentEncodeCodePoint } from './uri-path.js';
