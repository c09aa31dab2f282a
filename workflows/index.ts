export * from './delivery.ts';
export * from './retention.ts';
