/** How many decisions may be pending (admitted, not yet answered) at once. */
export interface AdmissionLimits {
  /** In this process, over all callers. */
  total: number;
  /** For one caller: an authenticated caller by name, else one client address. */
  perCaller: number;
}

/** The service's defaults (QUOTA_MAX_PENDING_DECISIONS, QUOTA_MAX_PENDING_DECISIONS_PER_CALLER). */
export const DEFAULT_ADMISSION: AdmissionLimits = { total: 50_000, perCaller: 10_000 };
