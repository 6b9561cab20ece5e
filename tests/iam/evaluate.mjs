// Evaluates the AWS calls the functions made in the tests against each
// function's IAM policy in template.yaml, with @cloud-copilot/iam-simulate
// (a maintained IAM policy evaluator), and reports the permissions granted
// that no call used.
//
//   node tests/iam/evaluate.mjs < calls.json > result.json
//
// Input (written by functions/common/tests/iam.rs):
//   { "region", "account", "stack", "table", "bucket", "state_machine",
//     "parameters": { template parameter overrides },
//     "calls": [ { function, operation, action, resource, context } ] }
// Output:
//   { "evaluated": { function: distinct calls }, "denied": [ call + why ],
//     "unused": { function: [ "action resource" ] }, "report": markdown }
//
// The template's intrinsics (!Ref, !Sub, !GetAtt, !If, !Equals, !Not) are
// resolved for a stack named `stack` whose table and bucket are the
// emulator's `table` and `bucket`, and whose branch-timer state machine is
// the emulator's `state_machine`.

import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import yaml from 'js-yaml'
import { runSimulation } from '@cloud-copilot/iam-simulate'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const input = JSON.parse(readFileSync(0, 'utf8'))

// --- template.yaml with CloudFormation's short-form tags ---------------
const tags = []
for (const [name, fn] of [
  ['Ref', 'Ref'], ['Sub', 'Fn::Sub'], ['GetAtt', 'Fn::GetAtt'], ['If', 'Fn::If'],
  ['Equals', 'Fn::Equals'], ['Not', 'Fn::Not'], ['And', 'Fn::And'], ['Or', 'Fn::Or'],
  ['Join', 'Fn::Join'], ['Select', 'Fn::Select'], ['Split', 'Fn::Split'],
  ['Condition', 'Condition'], ['FindInMap', 'Fn::FindInMap'],
]) {
  for (const kind of ['scalar', 'sequence', 'mapping']) {
    tags.push(new yaml.Type(`!${name}`, {
      kind,
      construct: (data) => ({ [fn]: name === 'GetAtt' && typeof data === 'string' ? data.split('.') : data }),
    }))
  }
}
const template = yaml.load(readFileSync(join(root, 'template.yaml'), 'utf8'), {
  schema: yaml.DEFAULT_SCHEMA.extend(tags),
})

const { region, account, stack } = input
const parameters = {}
for (const [k, v] of Object.entries(template.Parameters ?? {})) parameters[k] = v.Default
Object.assign(parameters, input.parameters ?? {})
const pseudo = {
  'AWS::Partition': 'aws', 'AWS::Region': region, 'AWS::AccountId': account,
  'AWS::StackName': stack, 'AWS::URLSuffix': 'amazonaws.com',
}
const physical = {
  MetaTable: { Ref: input.table, Arn: `arn:aws:dynamodb:${region}:${account}:table/${input.table}` },
  ArtifactBucket: { Ref: input.bucket, Arn: `arn:aws:s3:::${input.bucket}` },
}
const NO_VALUE = Symbol('AWS::NoValue')

function ref(name) {
  if (name === 'AWS::NoValue') return NO_VALUE
  if (name in pseudo) return pseudo[name]
  if (name in parameters) return parameters[name]
  if (physical[name]) return physical[name].Ref
  throw new Error(`template.yaml: cannot resolve !Ref ${name}`)
}
function getAtt([name, attr]) {
  const v = physical[name]?.[attr]
  if (v === undefined) throw new Error(`template.yaml: cannot resolve !GetAtt ${name}.${attr}`)
  return v
}
function condition(name) {
  const c = template.Conditions?.[name]
  if (!c) throw new Error(`template.yaml: no condition ${name}`)
  return resolve(c)
}
function resolve(v) {
  if (Array.isArray(v)) return v.map(resolve).filter((x) => x !== NO_VALUE)
  if (v === null || typeof v !== 'object') return v
  const keys = Object.keys(v)
  if (keys.length === 1) {
    const [k] = keys
    const a = v[k]
    switch (k) {
      case 'Ref': return ref(a)
      case 'Fn::GetAtt': return getAtt(a)
      case 'Fn::Sub': {
        const [text, vars] = Array.isArray(a) ? [a[0], resolve(a[1])] : [a, {}]
        return text.replace(/\$\{([^}!][^}]*)\}/g, (_, name) => {
          if (name in vars) return vars[name]
          if (name.includes('.')) return getAtt(name.split('.'))
          return ref(name)
        })
      }
      case 'Fn::If': return resolve(condition(a[0]) ? a[1] : a[2])
      case 'Fn::Equals': return resolve(a[0]) === resolve(a[1])
      case 'Fn::Not': return !resolve(a[0])
      case 'Fn::And': return a.every((x) => resolve(x))
      case 'Fn::Or': return a.some((x) => resolve(x))
      case 'Condition': return condition(a)
      case 'Fn::Join': return resolve(a[1]).join(a[0])
      default:
        if (k.startsWith('Fn::')) throw new Error(`template.yaml: intrinsic ${k} is not supported here`)
    }
  }
  const out = {}
  for (const [k, x] of Object.entries(v)) {
    const r = resolve(x)
    if (r !== NO_VALUE) out[k] = r
  }
  return out
}

// Each function's identity policy: its SAM inline `Statement` policies.
const policies = {}
for (const [logical, r] of Object.entries(template.Resources)) {
  if (r.Type !== 'AWS::Serverless::Function') continue
  const fn = r.Metadata?.BuildProperties?.Binary
  const statements = []
  for (const p of r.Properties.Policies ?? []) {
    if (typeof p === 'object' && p.Statement) statements.push(...resolve(p.Statement))
    else throw new Error(`${logical}: policy ${JSON.stringify(p)} is not an inline statement list; teach tests/iam/evaluate.mjs its expansion`)
  }
  policies[fn] = { logical, policy: { Version: '2012-10-17', Statement: statements } }
}

// The emulator's state machine is the template's branch timer.
const machine = `${stack}-branch-timer`
function canonical(resource) {
  return resource
    .replace(/^arn:aws:states:[^:]*:[^:]*:stateMachine:(.*)$/, (_, name) =>
      `arn:aws:states:${region}:${account}:stateMachine:${name === input.state_machine ? machine : name}`)
    .replace(/^arn:aws:states:[^:]*:[^:]*:execution:([^:]*):(.*)$/, (_, name, exec) =>
      `arn:aws:states:${region}:${account}:execution:${name === input.state_machine ? machine : name}:${exec}`)
}

// A KMS key answers to its key policy first. The operator's key is taken
// to carry KMS's default key policy, which lets the account's IAM
// policies grant its use (the functions' statements then decide).
const defaultKeyPolicy = {
  Version: '2012-10-17',
  Statement: [{
    Sid: 'Enable IAM User Permissions',
    Effect: 'Allow',
    Principal: { AWS: `arn:aws:iam::${account}:root` },
    Action: 'kms:*',
    Resource: '*',
  }],
}

async function allowed(policy, call) {
  const r = await runSimulation({
    identityPolicies: [{ name: 'function', policy }],
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    resourcePolicy: call.action.startsWith('kms:') ? defaultKeyPolicy : undefined,
    request: {
      principal: `arn:aws:iam::${account}:role/${stack}-${call.function}`,
      action: call.action,
      resource: { resource: call.resource, accountId: account },
      contextVariables: call.context ?? {},
    },
  }, {})
  if (r.errors) return { ok: false, why: `the evaluator refused the request: ${r.errors.message ?? JSON.stringify(r.errors)}` }
  return { ok: r.overallResult === 'Allowed', why: r.overallResult }
}

// Objects under a customer-managed key (parameter KmsKeyArn) make S3 ask
// the caller for the key too (AWS: the permissions SSE-KMS requires):
// kms:GenerateDataKey for an object written, kms:Decrypt for one read.
// The SDK makes no KMS call of its own, so these follow from the S3 calls.
const kmsKey = parameters.KmsKeyArn
const kmsFor = { 's3:PutObject': 'kms:GenerateDataKey', 's3:GetObject': 'kms:Decrypt' }
const calls = input.calls.flatMap((c) => (kmsKey && kmsFor[c.action]
  ? [c, { ...c, operation: `${c.operation} (SSE-KMS)`, action: kmsFor[c.action], resource: kmsKey, context: {} }]
  : [c]))

// Distinct calls per function.
const distinct = new Map()
for (const c of calls) {
  const call = { ...c, resource: canonical(c.resource) }
  const key = JSON.stringify([call.function, call.action, call.resource, call.context])
  if (!distinct.has(key)) distinct.set(key, { ...call, operations: new Set() })
  distinct.get(key).operations.add(call.operation)
}

const evaluated = {}
const denied = []
for (const call of distinct.values()) {
  evaluated[call.function] = (evaluated[call.function] ?? 0) + 1
  const p = policies[call.function]
  const operations = [...call.operations].sort()
  if (!p) {
    denied.push({ ...call, operations, why: 'no function of template.yaml has this name' })
    continue
  }
  if (call.action.startsWith('unmapped:')) {
    denied.push({ ...call, operations, why: 'no IAM rule for this operation in shared/src/store/aws/calls.rs' })
    continue
  }
  const r = await allowed(p.policy, call)
  if (!r.ok) denied.push({ ...call, operations, why: r.why })
}

// Least privilege: each (action, resource) a statement grants, and whether
// any of the function's calls is allowed by it alone.
const unused = {}
const rows = []
for (const [fn, { logical, policy }] of Object.entries(policies).sort()) {
  const calls = [...distinct.values()].filter((c) => c.function === fn && !c.action.startsWith('unmapped:'))
  for (const s of policy.Statement) {
    const actions = [s.Action].flat()
    const resources = [s.Resource].flat()
    for (const action of actions) {
      for (const resource of resources) {
        const single = { Version: '2012-10-17', Statement: [{ ...s, Action: action, Resource: resource }] }
        let used = 0
        for (const c of calls) if ((await allowed(single, c)).ok) used++
        rows.push({ fn, logical, action, resource, used, condition: s.Condition })
        if (used === 0) (unused[fn] ??= []).push(`${action} ${resource}`)
      }
    }
  }
}

const generic = (r) => r
  .replaceAll(`arn:aws:dynamodb:${region}:${account}:table/${input.table}`, '${MetaTable.Arn}')
  .replaceAll(`arn:aws:s3:::${input.bucket}`, '${ArtifactBucket.Arn}')
  .replaceAll(`:${region}:${account}:`, ':${Region}:${Account}:')
  .replaceAll(`:${region}::`, ':${Region}::')
let report = `# IAM: what each function is granted, and what the tests used

Generated by \`functions/common/tests/iam.rs\` (run by \`tests/run\`; see
docs/aws.md, "IAM"): every AWS call each function made while the test drove
every route and event is evaluated against that function's policy in
template.yaml by [@cloud-copilot/iam-simulate](https://github.com/cloud-copilot/iam-simulate).
A denied call fails the test. This page lists, per function, each action and
resource its policy grants, and whether some call of the run is allowed by
that grant alone: an unused grant is a permission no test needed (least
privilege). Template parameters: ${Object.entries(input.parameters ?? {}).map(([k, v]) => `${k}=${v}`).join(', ') || 'the defaults'}.

| function | grants | unused |
|---|---:|---:|
`
for (const fn of Object.keys(policies).sort()) {
  const mine = rows.filter((r) => r.fn === fn)
  report += `| ${fn} | ${mine.length} | ${mine.filter((r) => r.used === 0).length} |\n`
}
let last = null
for (const r of rows) {
  if (r.fn !== last) {
    report += `\n## ${r.fn} (${r.logical})\n\n| action | resource | used |\n|---|---|---|\n`
    last = r.fn
  }
  const cond = r.condition ? ` (with ${Object.keys(r.condition).join(', ')} condition)` : ''
  report += `| \`${r.action}\` | \`${generic(r.resource)}\`${cond} | ${r.used === 0 ? '**unused**' : 'yes'} |\n`
}
process.stdout.write(JSON.stringify({
  evaluated,
  denied: denied.map((d) => ({ ...d, operations: d.operations ?? [] })),
  unused,
  report,
}))
