/**
 * What the overrides commands need once one runs: the admin call and the
 * override arguments and views, which bring the contract and gRPC. Loaded by
 * the action, so that quotactl starts without them.
 */
export const overrideModules = () => Promise.all([import('../admin-call.js'), import('../override-args.js'), import('../override-view.js')]);
