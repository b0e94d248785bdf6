/**
 * resourcesync: ResourceSync (ANSI/NISO Z39.99-2017) for Node.js.
 *
 * The root entry point exports the standard's model, the streaming reader and writer, and the validator.
 * The Source, the Destination and notifications have their own entry points (`resourcesync/source`, ...).
 *
 * @module
 */
export * from './core/index.js';
export * from './xml/index.js';
