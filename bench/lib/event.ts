/** The event the benchmark publishes: a realistic `docauth.completed` payload (about 0.5 KiB signed). */
export function sampleEventData(seq: number): Record<string, unknown> {
  return {
    request_id: `req_bench_${seq}`,
    result: seq % 7 === 0 ? 'fail' : 'pass',
    docauth_info: {
      document_type: 'passport',
      country_code: 'DE',
      nationality_code: 'DEU',
      nationality_name: 'German',
      sex: 'F',
      first_name: 'Erika',
      last_name: 'Mustermann',
      expiry_date: '2031-08-01',
      document_number: `C01X00T4${String(seq % 100).padStart(2, '0')}`,
      birth_date: '1984-08-12',
      current_result: 'pass',
    },
    processed_at: new Date().toISOString(),
    scores_applied: true,
  };
}
