export * from './delivery.ts';
export * from './retention.ts';
export * from './bulk-retry.ts';
export * from './repair.ts';
