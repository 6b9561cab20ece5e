#!/usr/bin/env bash
# Creates the bucket and table of resources.json inside LocalStack (run by
# LocalStack once it is ready). The same definitions serve the offline
# emulator (localstack/create_resources.py) and are checked against
# template.yaml by a test.
set -euo pipefail
spec=/etc/localstack/resources.json
bucket=$(python3 -c "import json; print(json.load(open('$spec'))['bucket'])")
awslocal s3api create-bucket --bucket "$bucket" >/dev/null 2>&1 || true
table_json=$(python3 -c "import json; print(json.dumps(json.load(open('$spec'))['table']))")
awslocal dynamodb create-table --cli-input-json "$table_json" >/dev/null 2>&1 || true
echo "ctx: bucket $bucket and table ready"
