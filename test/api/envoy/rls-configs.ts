/**
 * The rate limit configurations the end-to-end tests load: envoyproxy/ratelimit's
 * README examples (written from their description; a unit made longer where a
 * test counts to the limit, so that a window boundary cannot fall between two
 * calls), Istio's productpage example, descriptors as Envoy Gateway sends
 * them, and agentgateway-style MCP tool descriptors with token costs.
 */
export const README_EXAMPLES: Record<string, string> = {
  'example1.yaml': `domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
`,
  'example2.yaml': `domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`,
  'example3.yaml': `domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
`,
  'example4.yaml': `domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
  - key: single
    value: level
    rate_limit:
      requests_per_unit: 300
      unit: second
`,
  'example5.yaml': `domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true
  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
`,
  'example6.yaml': `domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 2
          unit: hour
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 2
          unit: hour
`,
  'example7.yaml': `domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: hour
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: hour
`,
  'example8.yaml': `domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
`,
  'example9.yaml': `domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
`,
};

export const ECOSYSTEM_EXAMPLES: Record<string, string> = {
  // Istio's global rate limit task: Envoy sends ("PATH", <the request path>).
  'istio-productpage.yaml': `domain: productpage-ratelimit
descriptors:
  - key: PATH
    value: "/productpage"
    rate_limit:
      unit: hour
      requests_per_unit: 1
  - key: PATH
    rate_limit:
      unit: hour
      requests_per_unit: 100
`,
  // Envoy Gateway's shape: a generic_key naming the route rule, then a header match and the client address.
  'gateway.yaml': `domain: gateway
descriptors:
  - key: generic_key
    value: httproute/default/api/rule/0
    descriptors:
      - key: x-user-id
        rate_limit:
          unit: hour
          requests_per_unit: 3
        descriptors:
          - key: remote_address
            rate_limit:
              unit: hour
              requests_per_unit: 2
`,
  // agentgateway's remote rate limit for MCP tools: the tool name and the JWT subject, tokens as hits.
  'mcp.yaml': `domain: mcp
failure_mode: fail_closed
descriptors:
  - key: mcp.tool.name
    descriptors:
      - key: jwt.sub
        limit:
          name: tool-tokens
          algorithm: token_bucket
          capacity: 1000
          refill_per_second: 0.001
  - key: tool
    value: search
    limit:
      algorithm: fixed_window
      limit: 4
      window: 90s
`,
  // Our additions: an override-free sliding window and all-or-nothing across two rules.
  'ours.yaml': `domain: ours
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 5
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 2
  - key: week
    rate_limit:
      unit: week
      requests_per_unit: 3
  - key: sliding
    limit:
      algorithm: sliding_window_log
      limit: 2
      window: 1h
`,
  // Ours: tokens checked before a model call (hits 0) and charged after its response, even over the budget.
  'llm.yaml': `domain: llm
descriptors:
  - key: jwt.sub
    spend_when_over: true
    limit:
      name: llm-tokens
      algorithm: token_bucket
      capacity: 1000
      refill_per_second: 0.001
  - key: route
    rate_limit:
      unit: hour
      requests_per_unit: 100
`,
};
