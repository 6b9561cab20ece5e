"""Creates the (versioned) bucket and table of localstack/resources.json in an AWS
emulator (moto or LocalStack). Idempotent: existing resources are kept.

Usage: create_resources.py ENDPOINT_URL [DYNAMODB_ENDPOINT_URL]
"""
import json
import pathlib
import sys

import boto3
from botocore.exceptions import ClientError

endpoint = sys.argv[1]
ddb_endpoint = sys.argv[2] if len(sys.argv) > 2 else endpoint
spec = json.loads((pathlib.Path(__file__).parent / "resources.json").read_text())
kw = dict(endpoint_url=endpoint, region_name="us-east-1",
          aws_access_key_id="test", aws_secret_access_key="test")

s3 = boto3.client("s3", **kw)
try:
    s3.create_bucket(Bucket=spec["bucket"])
except ClientError as e:
    if e.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
        raise

# Versioned, as template.yaml's bucket: deletes must remove every version.
s3.put_bucket_versioning(Bucket=spec["bucket"],
                         VersioningConfiguration={"Status": "Enabled"})

ddb = boto3.client("dynamodb", **{**kw, "endpoint_url": ddb_endpoint})
try:
    ddb.create_table(**spec["table"])
except ClientError as e:
    if e.response["Error"]["Code"] != "ResourceInUseException":
        raise
ddb.get_waiter("table_exists").wait(TableName=spec["table"]["TableName"])
print(f"created bucket {spec['bucket']} and table {spec['table']['TableName']}", file=sys.stderr)
