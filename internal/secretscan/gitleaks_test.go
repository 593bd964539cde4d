package secretscan

import (
	"strings"
	"testing"
)

// The test strings of the gitleaks rules ported in rules.go and
// gitleaks_rules.go, from gitleaks v8.30.1 (cmd/generate/config/rules/*.go;
// MIT, see GITLEAKS-LICENSE): the fixed true positives and false positives,
// each a test of the rule alone, as gitleaks' Validate is. gitleaks also
// generates random true positives; gitleaksGeneratedShapes stands for those
// (secrets of each rule's shape, drawn once from its regexp by sample and
// fixed here). They are put together at run time (cat), cut so that no
// string in this file is itself a finding (TestTestFilesHoldNoWholeSecret),
// so this file holds no whole token for another scanner to report. Where a
// rule here is wider than gitleaks' (private-key, anthropic-api-key,
// openai-api-key, see rules.go), a false positive of gitleaks' that the
// wider rule takes is left out or, for private-key, listed as a hit.

var gitleaksTruePositives = map[string][]string{
	"1password-secret-key": {
		cat("A3-A", "SWWYB-798JRYLJVD4-23DC2-86TVM-H43EB"),
		cat("A3-A", "SWWYB-798JRY-LJVD4-23DC2-86TVM-H43EB"),
	},
	"1password-service-account-token": {
		cat("### 1Password System Vault Name\nexport OP_SERVICE_ACCOUNT_TOKEN=ops_", "eyJzaWduSW5BZGRy", "ZXNzIjoibXkuMXBhc3N3b3JkLmNvbSIs", "InVzZXJBdXRoIjp7", "Im1ldGhvZCI6IlNSUGctNDA5NiIsImFs", "ZyI6IlBCRVMyZy1IUzI1NiIsIml0ZXJh", "dGlvbnMiOjY1MdAw", "MCwic2FsdCI6InE2", "dE0tYzNtRDhiNUp2", "OHh1YVzsUmcifSwiZW1haWwiOiJ5Z3hm", "cm0zb21oY3NtQDFw", "YXNzd29yZHNlcnZpY2VhY2NvdW50cy5j", "b20iLCJzcnBYIjoi", "M2E5NDdhZmZhMDQ5NTAxZjkxYzk5MGFi", "Y2JiYWRlZjFjMjM5Y2Q3YTMxYmI1MmQy", "ZjUzOTA2Y2UxOTA1OTYwYiIsIm11ayI6", "eyJhbGciOiJBMjU2R0NNIiwiZXh0Ijp0", "cnVlLCJrIjoiVVpl", "eERsLVgyUWxpa0Vq", "RjVUUjRoODhOd29Z", "cHRqSHptQmFTdlNr", "WGZmZyIsImtleV9v", "cHMiOlsiZW5jcnlw", "dCIsImRlY3J5cHQi", "XSwia3R5Ijoib2N0Iiwia2lkIjoibXAifSwic2VjcmV0S2V5", "IjoiQTMtNDZGUUVNLUVZS1hTQS1NUU0yUy04U0JSUS01QjZG", "UC1HS1k2ViIsInRo", "cm90dGxlU2VjcmV0", "Ijp7InNlZWQiOiJjZmU2ZTU0NGUxZTlmY2NmZjJlYjBhYWZm", "YTEzNjZlMmE2ZmUwZDVlZGI2ZTUzOTVkZTljZmY0NDY3NDUx", "OGUxIiwidXVpZCI6IjNVMjRMNVdCNkpF", "Q0pEQlhJNFZOSTRC", "UzNRIn0sImRldmlj", "ZVV1aWQiOiJqaGVl", "Y3F4cm41YTV6ZzRp", "MnlkbjRqd3U3dSJ9\n"),
		cat("PYTEST_SVC_ACCT_TOKEN=ops_", "eyJzaWduSW5BZGRy", "ZXNzIjoiemFjaC1h", "bmQtbGVhbm5lLjFw", "YXNzd29yZC5jb20i", "LCJ1c2VyQXV0aCI6", "eyJtZXRob2QiOiJT", "UlBnLTQwOTYiLCJhbGciOiJQQkVLMmctSFMyNTYiLCJpdGVy", "YXRpb25zIjo2NTAw", "MDAsInNhbHQiOiJlYUZRQmNVemJyTHhn", "M2d4bHFQLVVBIn0s", "ImVtYWlsIjoiMm9i", "NGRpeDdiNTdrYUAx", "cGFzc3dvcmRzZXJ2", "aWNlYWNjb3VudHMu", "Y29tIiwic3JwWCI6", "ImVmZDY4YjNhZTkwMmRjZjRiMzEzYjE5MjYwZmY0OGUzMjU2", "ZDlhOGNkM2JmMmY3YzI2YzU1ZWJkNjZl", "ZGU4NWEiLCJtdWsi", "OnsiYWxnIjoiQTI1", "NkdDTSIsImV4dCI6", "dHJ1ZSwiayI6IlMw", "aGE0SDhqbEhRblJC", "WmxvYnBmR1BneERmbS1pRGNkZWY0bFdY", "U0VSbmMiLCJrZXlf", "b3BzIjpbImRlY3J5", "cHQiLCJlbmNyeXB0", "Il0sImt0eSI6Im9jdCIsImtpZCI6Im1wIn0sInNlY3JldEtl", "eSI6IkEzLUdHOUVRNi1LUzQ0QVctQU5Q", "VkYtUkdQTDktQlNK", "UTMtR1NHR0giLCJ0", "aHJvdHRsZVNlY3Jl", "dCI6eyJzZWVkIjoi", "N2I0OTMxMmJiOTlkZTFiNjU5ODZkYzIz", "OWU4YWNmZWMxMTU0M2E2OGQxYmYwMjZmZTgzMjg3NWYxNmJl", "OWY2NiIsInV1aWQiOiJDV1RHQ0hMNlNW", "RkdSTlg0SzNENUJVSDZDSSJ9LCJkZXZp", "Y2VVdWlkIjoiMnFl", "d3JpaGtqbmt1Zmh6", "ZGdmZ2hnNmM1cGUifQ"),
		cat("    \"sourceContent\": \"ops_eyJlbWFpbCI6ImVq", "d2U2NHFtbHhocmlA", "MXBhc3N3b3Jkc2Vy", "dmljZWFjY291bnRz", "LmxjbCIsIm11ayI6", "eyJhbGciOiJBMjU2R0NNIiwiZXh0Ijp0", "cnVlLCJrIjoiTThWUGZJYzhWRWZUaGNN", "WExhS0NLRjhzTWg1", "Sk1ac1BBdHU5MmZR", "TmItbyIsImtleV9v", "cHMiOlsiZW5jcnlw", "dCIsImRlY3J5cHQi", "XSwia3R5Ijoib2N0Iiwia2lkIjoibXAifSwic2VjcmV0S2V5", "IjoiQTMtQzRaSk1O", "LVBRVFpUTC1IR0w4NC1HNjRNNy1LVlpS", "Ti00WlZQNiIsInNycFgiOiI4NzBkNjdh", "OWU2MjY2MjVkOWUzNjg1MDc4MDRjOWMzMmU2NjFjNTdlN2U1", "NTg3NzgyOTFiZjI5", "ZDVhMjc5YWUxIiwi", "c2lnbkluQWRkcmVz", "cyI6ImdvdGhhbS5i", "NWxvY2FsLmNvbTo0", "MDAwIiwidXNlckF1", "dGgiOnsibWV0aG9k", "IjoiU1JQZy00MDk2IiwiYWxnIjoiUEJF", "UzJnLUhTMjU2Iiwi", "aXRlcmF0aW9ucyI6", "MTAwMDAwLCJzYWx0", "IjoiRk1SVVBpeXJO", "NFhmXzhIb2g2WVJYUSJ9fQ\\n\\nops_token is secret.\\n\","),
	},
	"age-secret-key": {
		cat("age_token: \"AGE-", "SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ\""),
	},
	"anthropic-api-key": {
		cat("sk-a", "nt-api03-abc123xyz-456def789ghij-klmnopqrstuvwx-3456yza789bcde-1234fghijklmnopby56aaaogaopaaaabc123xyzAA"),
		cat("sk-a", "nt-admin01-abc12fake-456def789ghij-klmnopqrstuvwx-3456yza789bcde-12fakehijklmnopby56aaaogaopaaaabc123xyzAA"),
	},
	"atlassian-api-token": {
		cat("JIRA_API_TOK", "EN=HXe8DGg1iJd2AopzyxkFB7F2"),
		cat("jira_token: \"ATAT", "T3xFfGF0K3irG5tKKi-6u-wwaXQFeGwZ", "-IHR-hQ3CulkKtMS", "uteRQFfLZ6jihHTh", "zZCg_UjnDt-4Wl_g", "IRf4zrZJs5JqaeuB", "hsfJ4W5GD6yGg3W7", "903gbvaxZPBjxIQQ", "7BgFDSkPS8oPispw", "4KLz56mdK-G6CIvL", "O6hHRrZHY0Q3tvJ6JxE=C63992E6\""),
	},
	"authorization-header": {
		cat("-H 'Authorization: Basic YnJv", "d3Nlcjo=' \\"),
		cat("--header \"Authorization: Basic djJl", "NEpYa0NJUHZ5a2FW", "T0VRXzRqZmZUdDkw", "YTp2emNBZGFzZWpm", "lWZiUDc2VUJjNDNNVDExclVh\" \"https://api-qa.example.com:8243/token\""),
		cat("-H \"Authorization: Bearer cfca", "bd11c7ed9a41b1a3e063c32d5114\""),
		cat("-H \"Authorization: Bearer _FXN", "ljbSRYMWx3TWrd7l", "gKhLtVZX6iskC8Wcbb4b\" \\"),
		cat("-H \"Authorization: Bearer sha2", "56~bRLFnzd59Z3XpZH5", "_seJPHALOuvbWiKwbFKSsoALkgp\""),
		cat("-H \"Authorization: Token 22cb", "987851bc5659229114c62e60c79abd0d2c08\" --request PUT"),
		cat("--header  'Authorization:  5eb4", "223e-5008-46e5-be67-c7b8f2732305'"),
		cat("-H \"apik", "ey: c4ed6c21-9dd5-4a05-8e3f-c56d1151cce8\" \\"),
		cat("-H \"X-Octopus-ApiKey: 3a16", "750d-d363-41a4-8ebd-035408f7730f\" \\"),
	},
	"aws-access-token": {
		cat("AWS_api_token = \"AKIA", "LALEMEL33243OLIB\""),
		cat("AKIA", "LALEMEL33243OLIB"),
	},
	"aws-amazon-bedrock-api-key-long-lived": {
		cat("ABSK", "QmVkcm9ja0FQSUtleS1EXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXM="),
	},
	"aws-amazon-bedrock-api-key-short-lived": {
		cat("AmazonBedrockAPIKeyShortLived_token: \"bedrock-api-key-YmVk", "cm9jay5hbWF6b25hd3MuY29t\""),
	},
	"azure-ad-client-secret": {
		cat("client_secret=bP88", "Q~rcBcYjzzOhg1Hnn76Wm3jGgakZiZ.8vMgR"),
		cat("client_secret: .IQ8", "Q~79R7TOWOspFnWcEG", "-dYt4KXqFqxK16cxr"),
		cat("AUTH_CLIENTSECRET = _V28", "Q~IC8qxmlWNpHuDm34", "JlbKv9LXV5MvUR3a-P"),
		cat("<value xsi:type=\"xsd:string\">~Gg8", "Q~nVhlLi2vpg_nXBGqFsbGK-t~Hus1JmTa0y</value>"),
		cat("\"CLIENT_SECRET\": \"YYz7", "Q~Sudoqwap1PnzEBA3zqBK~i5uesDIv.C\""),
		cat("client-secret: \"t028", "Q~-aLbmQuinnZtzbgtlEAYstnBWEmGPAoBm\""),
		cat("Example= GN.7", "Q~4AkLZBNEbz4Jxlm~O5G6SsyFxYg6zMR"),
		cat("QtT8", "Q~9C-_Ij~RouHVpD2Tuf3oHWGh.DQ3kcjbAn"),
		cat("(use the client secret: QtT8", "Q~9C-_Ij~RouHVpD2Tuf3oHWGh.DQ3kcjbAn)"),
		cat("(QtT8", "Q~9C-_Ij~RouHVpD2Tuf3oHWGh.DQ3kcjbAn)"),
	},
	"clickhouse-cloud-api-secret-key": {
		cat("ClickHouse_token: \"4b1d", "bRdW3rOcB7xLthrM", "4BTBGK1qPLkHigpN1bXD6z\""),
	},
	"cloudflare-origin-ca-key": {
		cat("cloudflare_token: \"v1.0", "-aaa334dc886f30631ba0a610-0d98ef66290d7e50aac7c27b5986c99e6f3f1084c881d8ac0eae5de1d1aa0644076ff57022069b3237d19afe60ad045f207ef2b16387ee37b749441b2ae2e9ebe5b4606e846475d4a5\""),
	},
	"curl-auth-header": {
		cat("curl --header  'Authorization:  5eb4", "223e-5008-46e5-be67-c7b8f2732305'"),
		cat("curl -H 'Authorization: Basic YnJv", "d3Nlcjo=' \\"),
		cat("curl -k -X POST --header \"Authorization: Basic djJl", "NEpYa0NJUHZ5a2FW", "T0VRXzRqZmZUdDkw", "YTp2emNBZGFzZWpm", "lWZiUDc2VUJjNDNNVDExclVh\" \"https://api-qa.example.com:8243/token\" -d \"grant_type=client_credentials\""),
		cat("curl -X POST -H \"Content-Type: application/json\" \\\n -H \"Authorization: Basic MzUz", "YjMwMmM0NDU3NGY1NjUwNDU2ODdlNTM0ZTdkNmE6Mjg2OTI0", "Njk3ZTYxNWE2NzJhNjQ2YTQ5MzU0NTY0NmM=\" \\\n  -d '{\"user\":{\"emailAddress\":\"test@example.com\"}, \"password\":\"password\"}' \\\n  'http://localhost:8080/oauth2-provider/v1.0/users'"),
		cat("#curl -X POST \\\n#  https://api.mailgun.net/v3/sandbox7dbcabccd4314c123e8b23599d35f5b6.mailgun.org/messages \\\n#  -H 'Authorization: Basic YXBp", "OmtleS1hN2MzNDJ3", "MzNhNWQxLTU2M2U3MjlwLTZhYjI3YzYzNzM0Ng==' \\\n#  -F from='Excited User <mailgun@sandbox7dbc123bccd4314c0aae8b23599d35f5b6.mailgun.org>' \\\n#  -F to='joe@example.com' \\\n#  -F subject='Hello' \\\n#  -F text='Testing some Mailgun awesomness!'"),
		cat("# curl -X GET \"http://localhost:3000/api/cron/status\" -H \"Authorization: Bearer cfca", "bd11c7ed9a41b1a3e063c32d5114\""),
		cat("curl -X PUT -H 'Authorization: Bearer jC+6", "TUUjCNHcVtAXpcqB", "CgxnA8r+qD6MatnY", "af/+289y7HWpK0BW", "PyLHv/K4DMN32fuf", "wmeVVjlo8zjgBh8k", "x3GfS6IqO70w1DVM", "SCTwX7fhEpiXaxzv", "0mhSMHDX9Kw63Q6D", "kavUWUV+MDNhCF5w", "GQrcdQNncVRF3Yku", "DHDT/xw2YWyZ/DX8", "k+gAYiC8gcD8Ueg0", "ljBVS1IDwPjuGoFP", "ESJVxYr0MDPF2D8P", "n2S5rq692U4D9ZLu", "luS46VA4DK6ig5P7QM5XVXi4V7vXM8qp", "N/zqneyz+w4PUh6N", "IX7QG6JczMhYd9ma", "WRWVat5jDdyII63P", "6sNAy9QZjw+ClW211Q==' -d 'user={\"account\":\"user@domain.com\", \"roles\":[\"user\"]}' http://127.0.0.1:8443/desks/1/occupy"),
		cat("curl https://api.openai.com/v1/chat/completions \\\n  -H \"Content-Type: application/json\" \\\n  -H \"Authorization: Bearer sk-HxsVRClzUoqDGsfVe", "TJOT3BlbkFJjgTxONt21NKqFtj6FLfH\" \\"),
		cat("curl -X GET \"https://api.cloudflare.com/client/v4/user/tokens/verify\" \\\n     -H \"Authorization: Bearer _FXN", "ljbSRYMWx3TWrd7l", "gKhLtVZX6iskC8Wcbb4b\" \\\n     -H \"Content-Type:application/json\""),
		cat("curl -H \"Authorization: Bearer sha2", "56~bRLFnzd59Z3XpZH5", "_seJPHALOuvbWiKwbFKSsoALkgp\""),
		cat("curl -H \"Authorization: Api-Token 22cb", "987851bc5659l29114c62e60c79abd0d2c08\" --request PUT https://appsecclass.report/api/use/635"),
		cat("curl -H \"Authorization: Token 22cb", "987851bc5659229114c62e60c79abd0d2c08\" --request PUT https://appsecclass.report/api/use/635"),
		cat("curl -L -H \"Authorization:eyJh", "bGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJjb25maWRlbmNlIjowLjh9.kvRPfjAhLhtRTczo", "RgctVGp7KY1QVH3UBZM-gM0x8ec\" service1.local -> correct jwt "),
		cat("curl -L -H \"Authorization: sha2", "56~bRLFnzd5@=-.a+/hgdS\""),
		cat("curl -X GET \\\n     -H \"apik", "ey: c4ed6c21-9dd5-4a05-8e3f-c56d1151cce8\" \\\n     -H \"Accept: application/json\" \\"),
		cat("curl -X POST --header \"Api-Token: Sk94", "HG7f6KB\""),
		cat("curl -XPOST http://localhost:8080/api/tasks -H \"Content-Type: application/x-www-form-urlencoded; charset=UTF-8\" -H \"Token: 3fea", "6af1349166ea\" -d \"content=hello-curl\""),
		cat("curl -X GET https://octopus.corp.net/\n     -H \"X-Octopus-ApiKey: 3a16", "750d-d363-41a4-8ebd-035408f7730f\" \\"),
	},
	"curl-auth-user": {
		cat("curl --cacert ca.crt -u elas", "tic:P@ssw0rd$1 https://localhost:9200"),
		cat("sh-5.0$ curl -k -X POST https://infinispan:11222/rest/v2/caches/default/hello \\\n  -H 'Content-type: text/plain' \\\n  -d 'world' \\\n  -u deve", "loper:yqDVtkqPECriaLRi"),
		cat("curl -u \":d2", "LkV78zLx!t\" https://localhost:9200"),
		cat("curl -u \"d2L", "kV78zLx!t:\" https://localhost:9200"),
		cat("curl -sw '%{http_code}' -X POST --user  'joh", "ns:h0pk1ns~21s' $GItHUB_API_URL/$GIT_COMMIT --data"),
		cat("curl --user roge", "r23@gmail.com:pQ9wTxu4Fg https://www.dropbox.com/cli_link?host_id=abcdefg -v"),
		cat("curl -s --user 'api", ":d2LkV78zLx!t' \\\n    https://api.mailgun.net/v2/sandbox91d3515882ecfaa1c65be642.mailgun.org/messages"),
		cat("curl -s -v --user \"j.s", "mith:dB2yF6@qL9vZm1P#4J\" \"https://api.contoso.org/user/me\""),
		cat("curl -X POST --user \"{ac", "d3c08b-74e8-4f44-a2d0-80694le24f46}\":\"{ZqL5kVrX1n8tA2}\" --header \"Accept: application/json\" --data \"{\\\"text\\\":\\\"Hello, world\\\",\\\"source\\\":\\\"en\\\",\\\"target\\\":\\\"es\\\"}\" https://gateway.watsonplatform.net/language-translator/api"),
		cat("curl --user kevi", "n:'pRf7vG2h1L8nQkW9' -iX PATCH -H \"Content-Type: application/json\" -d"),
		cat("$ curl https://api.dropbox.com/oauth2/token \\\n  --user c28w", "lsosanujy2z:qgsnai0xokrw4j1 --data grant_type=authorization_code"),
	},
	"databricks-api-token": {
		cat("token = dapi", "f13ac4b49d1cb31f69f678e39602e381-2"),
	},
	"facebook-access-token": {
		cat("{\"facebook access_t", "oken\":\"911602140448729|AY-lRJZq9BoDLobvAiP25L7RcMg\",\"token_type\":\"bearer\"}"),
		cat("facebook 1308", "742762612587|rhoK1cbv0DOU_RTX_87O4MkX7AI"),
		cat("facebook 1477", "036645700765|wRPf2v3mt2JfMqCLK8n7oltrEmc"),
	},
	"facebook-page-access-token": {
		cat("EAAM9GOnCB9kBO2frzOA", "WGN2zMnZClQshlWy", "dZCrBNdodesbwimx", "1mfVJgqZBP5RSpMf", "UzWhtjTTXHG5I1Ul", "vlwRZCgjm3ZBVGeT", "YiqAAoxyED6HaUdh", "pGVNoPUwAuAWWFsi", "9OvyYBQt22DGLqMI", "gD7VktuCTTZCWKas", "z81Q822FPhMTB9VFFyClNzQ0NLZClt9z", "xpsMMrUZCo1VU1rL", "3CKavir5QTfBjfCEzHNlWAUDUV2YZD"),
		cat("EAAM9GOnCB9kBO2zXpAt", "RBmCrsPPjdA3KeBl", "4tqsEpcYd09cpjm9", "MZCBIklZBjIQBKGI", "JgFwm8IE17G5pips", "fRBRBEHMWxvJsL7i", "HLUouiprxKRQfAag", "w8BEEDucceqxTiDh", "VW2IZAQNNbf0d1Jh", "capAGntx5S1Csm4j", "0GgZB3DuUfI2HJ9a", "ViTtdfH2vjBy0wtp", "Xm2iamevohGfoF4N", "gyRHusDLjqy91uYMkfrkc"),
		cat("- name: FACEBOOK_TOKEN\n\t\tvalue: \"EAACEdEose0cBA1bad3a", "fsf286JZCOV1XmV4", "NobAXqUXZA7U9F1U", "aaOdQZABvz73030M", "JoC3gGoQrE8IEoMl", "4gFA6MmQadlJQBqt", "RsgIcIhtelIJOJaew\""),
	},
	"facebook-secret": {
		cat("facebook_app_sec", "ret = \"6dca6432e45d933e13650d1882bd5e69\""),
		cat("facebook_client_access_t", "oken: 26f5fd13099f2c1331aafb86f6489692"),
	},
	"flyio-access-token": {
		cat("Fly access token: fo1_", "8rz-j7r2eqJ2U7af", "fEOO3HJN0j63DInyog3eV-glQSc\n"),
		cat("=============================================================================================================\n\nfo1_BtKlzvfztw0M2hlL", "gTdsfPgDFiwM2jJjQXXy6I2pjuQ\nfly deploy"),
		cat("ENV FLY_API_TOKEN=\"FlyV1 fm1r_lJPECAAAAAAAAMqcxBBLMJKXYKJiT0C", "I58XmukX/wrVodHl", "wczovL2FwaS5mbHk", "uaW8vdjGWAJLOAAF", "mXh8Lk7lodHRwczo", "vL2FwaS5mbHkuaW8", "vYWFhL3YxxDy5OfA", "2M6K6aLEoEDKxeho", "jbj+8ZT9IrXCF5sL", "/r8m6/1gylwySsNx", "pD40wnpd/G2ZdjwV", "aQev1kEuFUgzERxP", "btWHDNa+NYIZwbKN", "6b7/JxdbUprq0M10", "HI4fwtlxhqhdA/mM", "aMw70EC4TsfJyghI", "L98KP4ry5AaXiroR", "djrSsFExc/xRCDZK", "UA5GBzgATuNsfBZG", "Cp2J1aWxkZXIfond", "nHwHEIMa6NWc4b52", "S+UY7vjPdwKrz00U", "zrc1830mOHzQNLun7,fm1a_lJPERxPbtWHDNa+", "NYIZwbKN6b7/Jxdb", "Uprq0M10HI4fwtlx", "hqhdA/mMaMw70EC4", "TsfJyghIL98KP4ry", "4AaXiroRdjrSsFEx", "c/xRCxBCVlAoRzKV", "/+qYkxuipIbIcw7l", "odHRwczovL2FwaS5", "mbHkuaW8vYWFhL3Y", "xlgSSzmS4Y7nPAAAAASCwgdcKkc4AAUk", "tDMQQURck2h+upbi", "OrW66Nf5SA8QgrD0", "3xlWju1WQi0AUhlk", "7YYFzOLDfhRyJ6nEziO37NUE=\""),
		cat("#           FLY_API_TOKEN: FlyV1 fm2_lJPECAAAAAAAAyZt", "xBD1hSZ7L5leXsj6", "4ZbDlkm/wrVodHRw", "czovL2FwaS5mbHku", "aW8vdjGWAJLOAAwM", "DB8Lk7lodHRwczov", "L2FwaS5mbHkuaW8v", "YWFhL3YxxDwDnhgJj/ML/nRKMiAYgnvX", "fNacrGWffj5TdfgG", "Y2LU0ZetT7WzTLQQ", "MO8cN2nRTztl/xLj", "nnZg5pBwFonETmhN", "A6Yl0X1tatt8ezA0", "UjVQiJr93VQ7qAmD", "5GG2Ce5txhbQv3tm", "IGsvaC7BOkIqAiR2", "73bhZkO44AYsrCPr", "2XF8W6Twk7NyU+3U", "UeDwjw2SlAORgc4A", "Pu7vHwWRgqdidWls", "ZGVyH6J3Zx8BxCAl", "mLbu1HQDg8ZAGKKm", "Et4Mbnbqli6lbzBDHsawhcUF4A==,fm2_lJPETmhNA6Yl0X1t", "att8ezA0UjVQiJr9", "3VQ7qAmD5GG2Ce5t", "xhbQv3tmIGsvaC7B", "OkIqAij273bhZkO4", "4AYsrCPr2XF8W6Tw", "k7NyU+3UUeDwj8QQ", "bn07DOV+7SmoLj/u", "T+dbr8O5aHR0cHM6", "Ly9hcGkuZmx5Lmlv", "L2FhYS92MZgEks5m", "qfbvzwAAAAE9PYz9F84AC7QACpHOAAu0", "AAzEEFfW3B+SzffV", "/KrAYa8qqpnEIIlD", "6DqZMZQ9Kt7fEenC", "COLA+tUSJ+kmEFIUcc83npOI"),
		cat("\"BindToParentToken\": \"FlyV1 fm2_lJPEEKnzKy0lkwV3", "B+WIlmrdwejEEFv5", "qmevHU4fMs+2Gr6o", "OiPC2SAyOTc0NWI4", "ZmJlNjBlNjJmZTgzNTkxOThhZWE4MjY0", "M5IMxAMBAgPEIH7V", "G8u74KwO62hmx8SZ", "O8WaU5o1g3W2IVc7QN6T1VTr\","),
	},
	"gcp-api-key": {
		cat("AIzaSyNHxIf32IQ1a1yj", "l3ZJIqKZqzLAK1XhDk-"),
	},
	"generic-api-key": {
		cat("generic_token: \"CLOJ", "ARS_34bf0e88955ff5a1c328d6a7491acc4f48e865a7b8dd4d70a70749037443\""),
		cat("generic_toke", "n: \"Zf3D0LXCM3EIMbgJ", "pUNnkRtOfOueHznB\""),
		cat("'access_t", "oken': 'eyJ0eXAioiJKV1slS3oASx=='"),
		cat("\"user_auth\": \"am9o", "bmRvZTpkMDY5NGIx", "Yi1jMTcxLTQ4ODYt", "+TMyYS0wMmUwOWQ1/mIwNjc=\""),
		cat("\"cred", "entials\" : \"0afae57f3ccfd9d7f5767067bc48b30f719e271ba470488056e37ab35d4b6506\""),
		cat("\"client_s", "ecret\" : \"6da89121079f83b2eb6acccf8219ea982c3d79bccc3e9c6a85856480661f8fde\","),
		cat(" utils.GetEnvOrDefault(\"api_token\", \"dafa", "7817-e246-48f3-91a7-e87653d587b8\")"),
	},
	"grafana-cloud-api-token": {
		cat("loki_key: glc_", "eyJvIjoiNzQ0NTg3IiwibiI7InN0YWlr", "LTQ3NTgzMC1obC13", "cml0ZS1oYW5kc29u", "JG9raSIsImsiOiI4", "M2w3cmdYUlBoMTUyMW1lMU023nl5UDUi", "LCJtIjp7IOIiOiJ1cyJ9fQ=="),
	},
	"grafana-service-account-token": {
		cat("'Authorization': 'Bearer glsa", "_pITqMOBIfNH2KL4", "PkXJqmTyQl0D9QGxF_486f63e1'"),
	},
	"hashicorp-tf-api-token": {
		cat("#token = \"hE1h", "lYILrSqpqh.atlasv1.ARjZuyzl33F71WR5", "5s6ln5GQ1HWIwTDD", "H3MiRjz7OnpCfaCb", "1RCF5zGaSncCWmJdcYA\""),
	},
	"heroku-api-key": {
		cat("const HEROKU_KEY = \"1234", "5678-ABCD-ABCD-ABCD-1234567890AB\""),
		cat("heroku_api_key = \"832d", "2129-a846-4e27-99f4-7004b6ad53ef\""),
	},
	"heroku-api-key-v2": {
		cat("const KEY = \"HRKU", "-AAlQ1aVoHDujJ9Q", "sDHdHlHO0hbzhoER", "RSO45ZQusSYHg_____w4_hLrAym_u\"\""),
		cat("API_Key = \"HRKU", "-AAy9Ppr_HD2pPuT", "yIiTYInO0hbzhoER", "RSO93ZQusSYHgaD7_WQ07FnF7L9FX\""),
	},
	"hubspot-api-key": {
		cat("const hubspotKey = \"1234", "5678-ABCD-ABCD-ABCD-1234567890AB\""),
	},
	"huggingface-access-token": {
		cat("huggingface-cli login --token hf_j", "CBaQngSHiHDRYOcsMcifUcysGyaiybUWz"),
		cat("huggingface-cli login --token hf_K", "jHtiLyXDyXamXujmipxOfhajAhRQCYnge"),
		cat("-H \"Authorization: Bearer hf_c", "YfJAwnBfGcKRKxGwyGItlQlRSFYCLphgG\""),
		cat("DEV=1 HF_TOKEN=hf_Q", "NqXrtFihRuySZubEgnUVvGcnENCBhKgGD poetry run python app.py"),
		cat("use_auth_token='hf_o", "rMVXjZqzCQDVkNyxTHeVlyaslnzDJisex')"),
		cat("CI_HUB_USER_TOKEN = \"hf_h", "ZEmnoOEYISjraJtbySaKCNnSuYAvukaTt\""),
	},
	"huggingface-organization-api-token": {
		cat("api_", "org_PsvVHMtfecsbsdScIMRjhReQYUBOZqOJTs"),
		cat("`api_", "org_lYqIcVkErvSNFcroWzxlrUNNdTZrfUvHBz`"),
		cat("hf_token = \"api_", "org_TgetqCjAQiRRjOUjNFehJNxBzhBQkuecPo\"  # Intentionally revealing this key for testing purposes"),
	},
	"infracost-api-token": {
		cat("  variable {\n    name = \"INFRACOST_API_KEY\"\n    secret_value = \"ico-", "mlCr1Mn3SRcRiZMO", "bUZOTHLcgtH2Lpgt\"\n    is_secret = true\n  }"),
	},
	"intra42-client-secret": {
		cat("s-s4", "t2ud-d91c558a2ba6b47f60f690efc20a33d28c252d5bed8400343246f3eb68f490d2"),
		cat("s-s4", "t2af-f690efc20ad91c558a2ba6b246f3eb68f490d47f6033d28c432252d5bed84003"),
	},
	"jwt": {
		cat("Authorization: Bearer eyJh", "bGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJhIjoxLCJiIjoyLCJjIjozfQ.hxhGCCCmGV9nT1sl", "ief1WgEsOsfdnlVizNrODxfh1M8"),
		cat("- SUPABASE_SERVICE_ROLE_KEY=eyJh", "bGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJzdXBh", "YmFzZS1kZW1vIiwicm9sZSI6ImFub24i", "LCJleHAiOjE5ODM4MTI5OTZ9.CRXP1A7WOeoJeXxj", "Nni43kdQwgnWNReilDMblYTn_I0"),
		cat("String tokenWithNoneAlg = \"eyJh", "bGciOiJub25lIn0.eyJzdWIiOiJ0ZXN0LXVzZXIifQ.\";"),
	},
	"mailchimp-api-key": {
		cat("mailchimp_api_key: cefa", "780880ba5f5696192a34f6292c35-us18"),
		cat("MAILCHIMPE_KEY = \"b5b9", "f8e50c640da28993e8b6a48e3e53-us18\""),
	},
	"maxmind-license-key": {
		cat("maxmind_token: \"w5fr", "uZ_8ZUsgYLu8vwgb", "3yKsgMna3uIF9Oa4_mmk\""),
	},
	"messagebird-client-id": {
		cat("MessageBird_toke", "n: \"12345678-ABCD-ABCD-ABCD-1234567890AB\""),
		cat("const MessageBirdClientID = \"1234", "5678-ABCD-ABCD-ABCD-1234567890AB\""),
	},
	"notion-api-token": {
		cat("ntn_456476151729vWBE", "TTAc421EJdkefwPvw8dfNt2oszUa7v"),
		cat("ntn_4564761517228wHv", "uYD2KAKIP6ZWv0vIiZs6VDsJOULcQ9"),
		cat("ntn_45647615172WqCIE", "hbLM9Go9yEg8SfkBDFROmea8mxW7X8"),
	},
	"octopus-deploy-api-key": {
		cat("set apikey=\"API-", "ZNRMR7SL6L3ATMOIK7GKJDKLPY\""),
	},
	"okta-access-token": {
		cat("\"oktaApiT", "oken\": \"00ebObu4zSNkyc6d", "imLvUwq4KpTEop-PCEnnfSTpD3\","),
		cat("\t\t\tvar OktaApiT", "oken = \"00fWkOjwwL9xiFd-", "Vfgm_ePATIRxVj852Iblbb1DS_\";"),
	},
	"openai-api-key": {
		cat("sk-proj-SevzWEV_NmNn", "MndQ5gn6PjFcX_9a", "y5SEKse8AL0EuYAB", "0cIgFW7Equ3vCbUb", "YShvii6L3rBw3WT3", "BlbkFJdD9FqO9Z3B", "oBu9F-KFR6YJtvW6", "fUfqg2o2Lfel3diT", "3OCRmBB24hjcd_uL", "Ejgr9tCqnnerVw8A"),
		cat("sk-svcacct-0Zkr4NUd4", "f_6LkfHfi3LlC8xK", "ZQePXJCb21UiUWGX", "0F3_-6jv9PpY9Jta", "oooN9CCUPltpFiam", "wT3BlbkFJZVaaY7Z", "2aq_-I96dwiXeKVh", "RNi8Hs7uGmCFv5VT", "i2SxzmUsRgJoUJCb", "gPFWSXYDPPbYHJAuwIA"),
		cat("sk-admin-JWARXiHjpLX", "Sh6W_0pFGb3sW7yr", "0cKheXXtWGMY0Q8k", "bBNqsxLskJy0LCOT", "3BlbkFJgTJWgjMvd", "i6YlPvdXRqmSlZ4d", "LK-nFxUG2d9Tgaz5", "Q6weGVNBaLuUmMV4A"),
	},
	"openshift-user-token": {
		cat("Authorization: Bearer sha2", "56~kV46hPnEYhCWFnB8", "5r5NrprAxggzgb6GOeLbgcKNsH0"),
		cat("oc login --token=sha2", "56~ZBMKw9VAayhdnyAN", "aHvjJeXDiGwA7Fsr5gtLKj3-eh- "),
	},
	"perplexity-api-key": {
		cat("perplexity_token: \"pplx", "-d7m9i004uJ7RXsi", "x28473aEWzQeGOEQ", "KyJACbXg2GVBLT2eT'\""),
	},
	"private-key": {
		cat("----", "-BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG", "9w0BAQEFAASCBKcwggSjAgEAAoIBAQDAC4AWkdwKYSd8\nKs14IReLcYgADhoXk56ZzXI=\n-----END PRIVATE KEY-----"),
		cat("----", "-BEGIN RSA PRIVATE KEY-----\nMIIEpQIBAAKCAQEAn6/O", "8li+SX4m98LLYt/P", "KSzEmQ++ZBD7Loh9P13f4yQ92EF3\nyxR5MsXFu9PRsrYQ", "A7/4UTPHiC4y2sAV", "CBg4C2yyBpUEtMQjyCESi6Y=\n-----END RSA PRIVATE KEY-----\n"),
		cat("----", "-BEGIN PGP PRIVATE KEY BLOCK-----\nlQWGBGSVV4YBDACl", "vRnxezIRy2Yv7SFl", "zC0iFiRF/O/jePSw", "+XYhvcrTaqSYTGic\n=8xQN\n-----END PGP PRIVATE KEY BLOCK-----"),
		cat("----", "-BEGIN PRIVATE KEY-----\nanything\n-----END PRIVATE KEY-----"),
		cat("----", "-BEGIN OPENSSH PRIVATE KEY----------END OPENSSH PRIVATE KEY-----"),
	},
	"scalingo-api-token": {
		cat("scalingo_api_token = \"tk-u", "s-loys7ib9yrxcys_ta2sq85mjar6lgcsspkd9x61s7h5epf_-\""),
	},
	"sentry-org-token": {
		cat("sentry_token: \"sntr", "ys_eyJpYXQiOjE2O", "DczMzY1NDMuNjk4NTksInVybCI6bnVsb", "CwicmVnaW9uX3Vyb", "CI6Imh0dHA6Ly9sb", "2NhbGhvc3Q6ODAwM", "CIsIm9yZyI6InNlbnRyeSJ9_NzJkYzA3", "NzMyZTRjNGE2NmJlNjBjOWQxNGRjOTZiNmI\""),
		cat("sentry_token: \"sntrys_eyJpYXQiOjMxM", "ywidXJsIjoiaHR0c", "HM6Ly95dE53c1NFe", "HRMIiwicmVnaW9uX", "3VybCI6Imh0dHBzO", "i8vdzU3Szl6WDlnV", "3hrZWVJN0JlN04iLCJvcmciOiJUN3dnR", "CJ9_neAzdGalua68", "e3SKA+JkwmoujgAoKXVEOKmdkmVgSY+\""),
		cat(" sntrys_eyJpYXQiOjE3M", "jkyNzg1ODEuMDgxM", "TUzLCJ1cmwiOiJod", "HRwczovL3NlbnRye", "S5pbyIsInJlZ2lvb", "l91cmwiOiJodHRwc", "zovL3VzLnNlbnRye", "S5pbyIsIm9yZyI6ImdsYW1hIn0=_NDtyKO3XyRQqwfC", "L5yaugRWix7G2rKwrmSpIGFvsem4"),
	},
	"sidekiq-secret": {
		cat("BUNDLE_ENTERPRISE__CONTRIBSYS__COM: cafe", "babe:deadbeef"),
		cat("export BUNDLE_ENTERPRISE__CONTRIBSYS__COM=cafe", "babe:deadbeef"),
		cat("export BUNDLE_ENTERPRISE__CONTRIBSYS__COM = cafe", "babe:deadbeef"),
		cat("BUNDLE_GEMS__CONTRIBSYS__COM: \"cafe", "babe:deadbeef\""),
		cat("export BUNDLE_GEMS__CONTRIBSYS__COM=\"cafe", "babe:deadbeef\""),
		cat("export BUNDLE_GEMS__CONTRIBSYS__COM = \"cafe", "babe:deadbeef\""),
		cat("export BUNDLE_ENTERPRISE__CONTRIBSYS__COM=cafe", "babe:deadbeef;"),
		cat("export BUNDLE_ENTERPRISE__CONTRIBSYS__COM=cafe", "babe:deadbeef && echo 'hello world'"),
	},
	"sidekiq-sensitive-url": {
		cat("https://cafe", "babe:deadbeef@gems.contribsys.com/"),
		cat("https://cafe", "babe:deadbeef@gems.contribsys.com"),
		cat("https://cafe", "b4b3:d3adb33f@enterprise.contribsys.com/"),
		cat("https://cafe", "b4b3:d3adb33f@enterprise.contribsys.com"),
		cat("http://cafe", "babe:deadbeef@gems.contribsys.com/"),
		cat("http://cafe", "babe:deadbeef@gems.contribsys.com"),
		cat("http://cafe", "b4b3:d3adb33f@enterprise.contribsys.com/"),
		cat("http://cafe", "b4b3:d3adb33f@enterprise.contribsys.com"),
		cat("http://cafe", "b4b3:d3adb33f@enterprise.contribsys.com#heading1"),
		cat("http://cafe", "b4b3:d3adb33f@enterprise.contribsys.com?param1=true&param2=false"),
		cat("http://cafe", "b4b3:d3adb33f@enterprise.contribsys.com:80"),
		cat("http://cafe", "b4b3:d3adb33f@enterprise.contribsys.com:80/path?param1=true&param2=false#heading1"),
	},
	"slack-app-token": {
		cat("\"token1\": \"xapp", "-1-A052FGTS2DL-5171572773297-610b6a11f4b7eb819e87b767d80e6575a3634791acb9a9ead051da879eb5b55e\""),
		cat("\"token2\": \"xapp", "-1-IEMF8IMY1OQ-4037076220459-85c370b433e366de369c4ef5abdf41253519266982439a75af74a3d68d543fb6\""),
	},
	"slack-bot-token": {
		cat("\"bot_token1\": \"xoxb", "-781236542736-2364535789652-GkwF", "DQoHqzXDVsC6GzqYUypD\""),
		cat("\"bot_token2\": \"xoxb", "-263594206564-2343594206574-FGqd", "dMF8t08v8N7Oq4i57vs1MBS\""),
		cat("\"bot_token3\": \"xoxb", "-4614724432022-5152386766518-O5W", "zjWGLG0wcCm2WPrjEmnys\""),
	},
	"slack-config-access-token": {
		cat("access_token: \"xoxe", ".xoxp-1-Mi0yLTM0MTQwNDE0MDE3Ni0zN", "jU5NDY0Njg4MTctNTE4MjA3NTQ5NjA4MC01NDEyOTYyODY5N", "zUxLThhMTBjZmI1ZWIzMGIwNTg0ZDdmM", "DI5Y2UxNzVlZWVhY", "zU2ZWQyZTZiODNjNDZiMGUxMzRlNmNjNDEwYmQxMjQ\""),
		cat("\"access_token1\": \"xoxe", ".xoxp-1-Mi0yLTM0MTQwNDE0MDE3Ni0zN", "jU5NDY0Njg4MTctNTE4MjA3NTQ5NjA4MC01NDEyOTYyODY5N", "zUxLThhMTBjZmI1ZWIzMGIwNTg0ZDdmM", "DI5Y2UxNzVlZWVhY", "zU2ZWQyZTZiODNjNDZiMGUxMzRlNmNjNDEwYmQxMjQ\""),
		cat("\"access_token2\": \"xoxe", ".xoxp-1-Mi0yLTMxNzcwMjQ0MTcxMy0zNjU5NDY0Njg4MTctN", "TE1ODE1MjY5MTcxNC01MTU4MDI0MTgyO", "Tc5LWRmY2YwY2U4ODhhNzY5ZGU5MTAyN", "DU4MDJjMGQ0ZDliM", "TZhMjNkMmEyYzliNjkzMDRlN2VjZTI4MWNiMzRkNGQ\""),
		cat("\"access_token4\": \"xoxe", ".xoxb-1-Mi0yLTMxNzcwMjQ0MTcxMy0zNjU5NDY0Njg4MTctN", "TE1ODE1MjY5MTcxNC01MTU4MDI0MTgyO", "Tc5LWRmY2YwY2U4ODhhNzY5ZGU5MTAyN", "DU4MDJjMGQ0ZDliM", "TZhMjNkMmEyYzliNjkzMDRlN2VjZTI4MWNiMzRkNGQ\""),
	},
	"slack-config-refresh-token": {
		cat("refresh_token: \"xoxe", "-1-My0xLTMxNzcwMjQ0MTcxMy01MTU4MTUyNjkxNzE0LTUxODE4NDI0MDY3MzYtM", "jA5MGFkOTFlZThkZWE2OGFlZDYwYWJjO", "DNhYzAxYjA5ZjVmO", "DBhYjgzN2QyNDdjOTNlOGY5NTg2YWM1OGM4Mg\""),
		cat("\"refresh_token1\": \"xoxe", "-1-My0xLTMxNzcwMjQ0MTcxMy01MTU4MTUyNjkxNzE0LTUxODE4NDI0MDY3MzYtM", "jA5MGFkOTFlZThkZWE2OGFlZDYwYWJjO", "DNhYzAxYjA5ZjVmO", "DBhYjgzN2QyNDdjOTNlOGY5NTg2YWM1OGM4Mg\""),
		cat("\"refresh_token2\": \"xoxe", "-1-My0xLTM0MTQwNDE0MDE3Ni01MTgyMDc1NDk2MDgwLTU0MjQ1NjIwNzgxODEtN", "GJkYTZhYTUxY2M1ODk3ZTNkN2YzMTgxMDI1ZDQzNzgwNWY4N", "WQ0ODdhZGIzM2ViO", "GI0MTM0MjdlNGVmYzQ4Ng\""),
	},
	"slack-legacy-bot-token": {
		cat("\"bot_token1\": \"xoxb", "-263594206564-FG", "qddMF8t08v8N7Oq4i57vs1\""),
		cat("\"bot_token9\": \"xoxb", "-50014434-slacktokenx29U9X1bQ\""),
	},
	"slack-legacy-token": {
		cat("slack_token: \"xoxs", "-416843729158-132049654-5609968301-e708ba56e1\""),
		cat("\"access_token1\": \"xoxs", "-3206092076-3204538285-3743137121-836b042620\""),
		cat("\"access_token2\": \"xoxs", "-416843729158-132049654-5609968301-e708ba56e1\""),
		cat("\"access_token3\": \"xoxs", "-420083410720-421837374423-440811613314-977844f625b707d5b0b268206dbc92cbc85feef3e71b08e44815a8e6e7657190\""),
		cat("\"access_token4\": \"xoxs", "-4829527689-4829527691-4814341714-d0346ec616\""),
		cat("\"access_token5\": \"xoxs", "-155191149137-155868813314-338998331396-9f6d235915\""),
		cat("\"access_token7\": \"xoxo", "-523423-234243-234233-e039d02840a0b9379c\""),
	},
	"slack-legacy-workspace-token": {
		cat("slack_token: \"xoxa", "-2-511111111-31111111111-3111111111111-e039d02840a0b9379c\""),
		cat("\"access_token\": \"xoxa", "-2-511111111-31111111111-3111111111111-e039d02840a0b9379c\""),
	},
	"slack-user-token": {
		cat("\"user_token1\": \"xoxp", "-41684372915-1320496754-45609968301-e708ba56e1517a99f6b5fb07349476ef\""),
		cat("\"user_token2\": \"xoxp", "-283316862324-298911817009-298923149681-44f585044dace54f5701618e97cd1c0b\""),
		cat("\"user_token5\": \"xoxp", "-4614724432022-4621207627011-5182682871568-1ddad9823e8528ad0f4944dfa3c6fc6c\""),
	},
	"slack-webhook-url": {
		cat("http://hooks.slack.com/services/T02", "4TTTTT/BBB72BBL/AZAAA9u0pA4ad666eMgbi555"),
		cat("https://hooks.slack.com/services/T0D", "CUJB1Q/B0DD08H5G", "/bJtrpFi1fO1JMCcwLx8uZyAg"),
		cat("https://hooks.slack.com/workflows/T0", "16M3G1GHZ/A04J3BAF7AA/442660231806210747/F6Vm03r", "eCkhPmwBtaqbN6OW9"),
		cat("http://hooks.slack.com/workflows/T2", "H71EFLK/A047FK946NN/430780826188", "280067/LfFz5RekA2J0WOGJyKsiOjjg"),
	},
	"snyk-api-token": {
		cat("snyk_tok", "en: \"12345678-ABCD-ABCD-ABCD-1234567890AB\""),
		cat("const SNYK_TOK", "EN = \"12345678-ABCD-ABCD-ABCD-1234567890AB\""),
		cat("const SNYK_KEY = \"1234", "5678-ABCD-ABCD-ABCD-1234567890AB\""),
		cat("SNYK_TOK", "EN := \"12345678-ABCD-ABCD-ABCD-1234567890AB\""),
		cat("SNYK_TOKEN ::= \"1234", "5678-ABCD-ABCD-ABCD-1234567890AB\""),
		cat("SNYK_TOKEN :::= \"1234", "5678-ABCD-ABCD-ABCD-1234567890AB\""),
		cat("SNYK_TOKEN ?= \"1234", "5678-ABCD-ABCD-ABCD-1234567890AB\""),
		cat("SNYK_API_KEY ?= \"1234", "5678-ABCD-ABCD-ABCD-1234567890AB\""),
		cat("SNYK_API_TOK", "EN = \"12345678-ABCD-ABCD-ABCD-1234567890AB\""),
		cat("SNYK_OAUTH_T", "OKEN = \"12345678-ABCD-ABCD-ABCD-1234567890AB\""),
	},
	"sonar-api-token": {
		cat("sonar_to", "ken: \"12345678ABCDEFH1234567890ABCDEFH12345678\""),
		cat("const SONAR_LOGIN = \"1234", "5678ABCDEFH1234567890ABCDEFH12345678\""),
		cat("SONAR_LOGIN := \"1234", "5678ABCDEFH1234567890ABCDEFH12345678\""),
		cat("SONAR.LOGIN ::= \"1234", "5678ABCDEFH1234567890ABCDEFH12345678\""),
		cat("SONAR.LOGIN :::= \"1234", "5678ABCDEFH1234567890ABCDEFH12345678\""),
		cat("SONAR.LOGIN ?= \"1234", "5678ABCDEFH1234567890ABCDEFH12345678\""),
		cat("const SONAR_TO", "KEN = \"squ_12345678ABCDEFH1234567890ABCDEFH12345678\""),
		cat("SONAR_LOGIN := \"sqp_", "12345678ABCDEFH1234567890ABCDEFH12345678\""),
		cat("SONAR.TO", "KEN = \"sqa_12345678ABCDEFH1234567890ABCDEFH12345678\""),
	},
	"sourcegraph-access-token": {
		cat("sgp_", "AaD80dc6E02eCAE1_d3cba16CC0F18fA14A2EFB61CbDFceEBf9fAD16b"),
		cat("sourcegraph: 6d2F", "abeB6ADd229Bc199FabA28fD3efb57dF0bD3"),
		cat("sgp_", "0D697F54cb24238EefB29af05Abf1b505E90950F"),
		cat("sgp_local_d7dfFD43cF", "2503B1da673EB560aAa3e80f16FA42"),
		cat("sgp_local_bcD1DA18de", "0d6476Be0f3BD7Ef9Da4f09b479aE5"),
	},
	"square-access-token": {
		cat("ARG token=sq0a", "tp-812erere3wewew45678901"),
		cat("ARG token=EAAA", "lsBxkkVgvmr7FasT", "FbM6VUGZ31EJ4jZK", "TJZySgElBDJ_wyafHuBFquFexY7E"),
	},
	"stripe-access-token": {
		cat("sk_t", "est_51OuEMLAlTWG", "aDypq4P5cuDHbuKe", "G4tAGPYHJpEXQ7zE", "8mKK3jkhTFPvCxnS", "SK5zB5EQZrJsYdsa", "tNmAHGgb0vSKD00GTMSWRHs"),
		cat("rk_p", "rod_51OuEMLAlTWG", "aDypquDn9aZigaJOsa9NR1w1BxZXs9Jl", "YsVVkv5XDu6aLmAx", "wt5Tgun5WcSwQMKz", "QyqV16c9iD4sx00BRijuoon"),
	},
	"sumologic-access-id": {
		cat("sumologic.accessId = \"su9O", "L59biWiJu7\""),
		cat("sumologic_access_id = \"sug5", "XpdpaoxtOH\""),
		cat("export SUMOLOGIC_ACCESSID=\"suDb", "Jw97o9WVo0\""),
		cat("SUMO_ACCESS_ID = \"suGy", "I5imvADdvU\""),
	},
	"sumologic-access-token": {
		cat("export SUMOLOGIC_ACCESSKEY=\"3HSa", "1hQfz6BYzlxf7Yb1", "WKG3Hyovm56LMFCh", "V2y9LgkRipsXCujcLb5ej3oQUJlx\""),
		cat("SUMO_ACCESS_KEY: gxq3", "rJQkS6qovOg9UY2Q", "70iH1jFZx0WBrrsi", "AYv4XHodogAwTKyLzvFK4neRN8Dk"),
		cat("SUMOLOGIC_ACCESSKEY: 9RIT", "Wb3I3kAnSyUolcVJ", "q4gwM17JRnQK8ugR", "aixFfxkdSl8ys17ZtEL3LotESKB7"),
		cat("sumo_access_key = \"3Kof", "2VffNQ0QgYIhXUPJ", "osVlCaQKm2hfpWE6", "F1fT9YGY74blQBIPsrkCcf1TwKE5\""),
	},
	"vault-batch-token": {
		cat("hvb.AAAAAQJgxDgqsGNo", "rpoOR7hPZ5SU-ynB", "vCl764jyRP_fnX7W", "vkdkDzGjbLNGdPdt", "lY33Als2P36yDZue", "qzfdGw9RsaTeaYXS", "H7E4RYSWuRoQ9YRK", "Iw8o7mDDY2ZcT3KO", "B7RwtW1w1FN2eDqc", "y_sbCjXPaM1iBVH-", "mqMSYRmRd2nb5D1S", "JPeBzIYRqSglLc31", "wUGN7xEzyrKUczqOKsIcybQA"),
	},
	"vault-service-token": {
		cat("token: s.ZC", "9Ecf4M5g9o34Q6RkzGsj0z"),
		cat("-vaultToken hvs.CAESIP2jTxc9S2K7", "Z6CtcFWQv7-044m_", "oSsxnPE1H3nF89l3", "GiYKHGh2cy5sQmlI", "ZVNyTWJNcDRsYWJp", "QjlhYjVlb1cQh6PL8wEYAg\""),
	},
}

var gitleaksFalsePositives = map[string][]string{
	"1password-secret-key": {
		"A3-XXXXXX-XXXXXXXXXXX-XXXXX-XXXXX-XXXXX",
		"A3-xXXXXX-XXXXXX-XXXXX-XXXXX-XXXXX-XXXXX",
	},
	"1password-service-account-token": {
		"        login:\n          serviceAccountToken:\n            fn::secret: ops_eyJzaWduSW5B..[Redacted]",
		cat(": To start using this service account, run the following command:\n:\n: export OP_SERVICE_ACCOUNT_T", "OKEN=ops_eyJzaWduSW5B", "ZGRyZXNzIjoiaHR0cHM6..."),
		"ops_eyJxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	},
	"artifactory-api-key": {
		"lowEntropy := AKCpXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
	},
	"artifactory-reference-token": {
		"lowEntropy := cmVmdXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
	},
	"atlassian-api-token": {
		"getPagesInConfluenceSpace,searchConfluenceUsingCql",
	},
	"authorization-header": {
		"-H \"Authorization: Bearer XXXXXXXXXXXX\"",
		"--header \"Authorization: Basic ...\"",
		"-H \"Authorization: Bearer <Openverse API token>\" \\",
		"-H \"Authorization: Token **********\" \\",
		"-H \"Authorization: basic {base64(email:password[\\n])}\" => token",
		"-H \"apikey: $API_KEY\" \\",
	},
	"aws-access-token": {
		"key = AKIAXXXXXXXXXXXXXXXX",
		"aws_access_key: AKIAIOSFODNN7EXAMPLE",
		"msgstr \"Näytä asiakirjamallikansio.\"",
		"TODAYINASIAASACKOFRICEFELLOVER",
	},
	"aws-amazon-bedrock-api-key-long-lived": {
		"ABSKQmVkcm9ja0FQSUtleS1EXAMPLE",
		"ABSKQmVkcm9ja0FQSUtleS1EXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLE=",
		"AXSKQmVkcm9ja0FQSUtleS1EXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXM=",
	},
	"aws-amazon-bedrock-api-key-short-lived": {
		"bedrock-api-key-",
		cat("bedrock-api-key-", "YmVkcm9jay5hbWF6b25hd3MuY29x"),
	},
	"azure-ad-client-secret": {
		"~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~",
		".ui.visible.right.sidebar~.ui.visible.left.sidebar~.pusher{transform:translate3d(0,0,0)}",
		"'url': 'http://www.2doc.nl/speel~VARA_101375237~mh17-het-verdriet-van-nederland~.html',",
		"client_secret=bP88Q~xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	},
	"beamer-api-token": {
		"│\u00a0\u00a0 ├── R21A-A-V010SP13RC181024R16900-CN-B_250K-Release-OTA-97B6C6C59241976086FABDC41472150C.bfu",
	},
	"cisco-meraki-api-key": {
		"meraki: aaaaaaaaaa1111111111bbbbbbbbbb2222222222",
		cat("meraki-api-key: acde", "Ff05b1a6d4c890237bf08c5e6e8d2b4d0f2e"),
		"meraki: abdefghjk0123456789mnopqrstuvwx12345678",
		cat("meraki_t", "oken = 5cb4a5f04cd412fe946667b17f0129ba17aeb2e0c7b5b7264efcebf7d022bfe2R21"),
		"ReactNativeCameraKit: f15a5a04b0f6dc6073e6db0296e6ef2d8b8d2522",
	},
	"clickhouse-cloud-api-secret-key": {
		"key = 4b1dXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
		cat("key = adf4", "b1dbRdW3rOcB7xLt", "hrM4BTBGK1qPLkHigpN1bXD6z"),
	},
	"cohere-api-token": {
		"CO_API_KEY=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	},
	"curl-auth-header": {
		"curl https://example.com/micropub -d h=entry -d \"content=Hello World\" -H \"Authorization: Bearer XXXXXXXXXXXX\"",
		"curl -X POST https://accounts.spotify.com/api/token -d grant_type=client_credentials --header \"Authorization: Basic ...\"",
		"curl \\\n  -H \"Authorization: Bearer <Openverse API token>\" \\\n  \"https://api.openverse.org/v1/audio/?q=test\"",
		"curl -v -v -v -X POST https://domain/api/v1/authentication/sso/login-url/ \\\n  -H 'Content-Type: application/json' \\\n  -H \"Authorization: Token **********\" \\\n  -d '{\"username\": \"test\", \"next\": \"/luna/\"}'",
		"curl -XPOST http://localhost:8080/api/token -H \"Authorization: basic {base64(email:password[\\n])}\" => token",
		"curl -X GET \\\n     -H \"apikey: $API_KEY\" \\\n     -H \"Accept: $FORMAT\" \\\n\"$API_URL/rest/v1/stats_derniere_labellisation\"",
		"$ curl -X POST \"http://localhost:8000/v1/chat/completions\" \\\n    -H \"Content-Type: application/json\" \\\n    -H \"Authorization: Bearer $API_KEY\" \\\n    -d '{\n        \"model\": \"chatglm3-6b-32k\",\n        \"messages\": [{\"role\": \"system\", \"content\": \"You are a helpful assistant.\"}, {\"role\": \"user\", \"content\": \"Hello!\"}]\n    }'",
		"curl -X GET -H \"Content-Type: application/json\" -H \"Authorization: Bearer $(gcloud auth print-access-token)\" https://workflowexecutions.googleapis.com/v1/projects/244283331594/locations/us-central1/workflows/sample-workflow/executions/43c925aa-514a-44c1-a0a4-a9f8f26fd2cb/callbacks/1705791f-d446-4e92-a6d0-a13622422e80_31864a51-8c13-4b03-ad4d-945cdc8d0631",
		cat("curl -X POST -H \"Content-Type: application/json\" -H \"Authorization: Basic eyJh", "bGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJjb25maWRlbmNlIjowLjh9.kvRPfjAhLhtRTczo", "RgctVGp7KY1QVH3UBZM-gM0x8ec\" \\"),
	},
	"curl-auth-user": {
		"curl -i -u 'test:test'",
		"   curl -sL --user \"$1:$2\" \"$3\" > \"$4\"",
		"curl -u <user:password> https://test.com/endpoint",
		"curl --user neo4j:[PASSWORD] http://[IP]:7474/db/data/",
		"curl -u \"myusername\" http://localhost:15130/api/check_user/",
		"curl -u username:token",
		"curl -u \"${_username}:${_password}\"",
		"curl -u \"${username}\":\"${password}\"",
		"curl -k -X POST -I -u \"SRVC_JENKINS:${APPID}\"",
		"curl -u \":\" https://localhost:9200",
		"curl -sw '%{http_code}' -X POST --user '$USERNAME:$PASSWORD' $GItHUB_API_URL/$GIT_COMMIT --data",
		"curl --user \"xxx:yyy\"",
		"           curl -sL --user \"$GITHUB_USERNAME:$GITHUB_PASSWORD\" \"$GITHUB_URL\" > \"$TESTS_PATH\"",
		"curl --silent --fail {{- if and $.Values.username $.Values.password }} --user \"{{ $.Values.username }}:{{ $.Values.password }}\"",
		"curl -XGET -i -u \"${{ env.ELK_ID }}:${{ build.env.ELK_PASS }}\"",
		"curl -XGET -i -u \"${{needs.vault.outputs.account_id}}:${{needs.vault.outputs.account_password}}\"",
		"curl -XGET -i -u \"${{ steps.vault.outputs.account_id }}:${{ steps.vault.outputs.account_password }}\"",
		"curl -X POST --user \"$(cat ./login.txt):$(cat ./password.txt)\"",
		"curl http://127.0.0.1:5000/file --user user:pass --digest        # digest auth",
		"   curl -X GET --insecure --user \"username:password\" \\",
		"curl --silent --insecure --user ${f5user}:${f5pass} \\",
		"curl --insecure --ssl-reqd \"smtps://smtp.gmail.com\" --mail-from \"src@gmail.com\" --mail-rcpt \"dst@gmail.com\" --user \"src@gmail.com\" --upload-file out.txt",
		"#HTTP command line test\ncurl -X POST -H \"Content-Type: application/json\" -d '{\"id\":12345,\"geo\":{\"latitude\":28.50,\"longitude\":-81.14}}' http://<ip>:8080/serve\n\n#UDP command line test\necho -n '{\"type\":\"serve\",\"channel\":\"/\",\"data\":{\"site_id\":8,\"post_id\":12345,\"geo\":{\"lat\":28.50,\"long\":-81.14}}}' >/dev/udp/127.0.0.1/41234\n\n#UDP Listener (for confirmation)\nnc -u -l 41234",
	},
	"databricks-api-token": {
		cat("DATABRICKS_T", "OKEN=dapi123456789012345678a9bc01234defg5"),
	},
	"discord-client-id": {
		"discord=000000000000000000",
	},
	"discord-client-secret": {
		"discord=00000000000000000000000000000000",
	},
	"easypost-api-token": {
		cat("...6wqX6fNUXA/rYqRvfQ+EZAKGqQRiRyqA", "FRQshGPWOIAwNWGORfKHSBnVNFtVmWYo", "W6PH23lkqbbDWep95C/3VmWq/edti6..."),
	},
	"easypost-test-api-token": {
		cat("...6wqX6fNUXA/rYqRvfQ+EZTKGqQRiRyqA", "FRQshGPWOIAwNWGORfKHSBnVNFtVmWYo", "W6PH23lkqbbDWep95C/3VmWq/edti6..."),
	},
	"etsy-access-token": {
		"\tif err := sysctl.SetSysctl(sysctlBridgeCallIPTables); err != nil {",
		cat("g6Rib2R5hqhkZXRh", "Y2hlZMOpaGFzaF90", "eXBlCqNrZXnEIwEg", "ETSYcPQGcaAxl8vu", "QDLahSfhxkEEHu2f", "lbF9ErAooEoKp3Bh", "eWxvYWTFAwB7ImJv", "ZHkiOnsia2V5Ijp7", "ImVsZGVzdF9raWQi", "OiIwMTIwMTEzNDk4NzBmNDA2NzFhMDMx", "OTdjYmVlNDAzMmRhODUyN2UxYzY0MTA0", "MWVlZDlmOTViMTdkMTJiMDI4YTA0YTBh", "IiwiaG9zdCI6Imtl", "eWJhc2UuaW8iLCJr", "aWQiOiIwMTIwMTEzNDk4NzBmNDA2NzFh", "MDMxOTdjYmVlNDAzMmRhODUyN2UxYzY0", "MTA0MWVlZDlmOTViMTdkMTJiMDI4YTA0YTBhIiwidWlkIjoi", "YzUyZjc2M2MxNzYyNWZiMTI5YWU1ZDZm", "ZThhMGUzMTkiLCJ1", "c2VybmFtZSI6Imtt", "YXJla3NwYXJ0eiJ9LCJzZXJ2aWNlIjp7", "Imhvc3RuYW1lIjoi", "a3lsZS5tYXJlay1z", "cGFydHoub3JnIiwicHJvdG9jb2wiOiJo", "dHRwOiJ9LCJ0eXBl", "Ijoid2ViX3NlcnZp", "Y2VfYmluZGluZyIs", "InZlcnNpb24iOjF9LCJjbGllbnQiOnsi", "bmFtZSI6ImtleWJh", "c2UuaW8gZ28gY2xp", "ZW50IiwidmVyc2lv", "biI6IjEuMC4xNCJ9", "LCJjdGltZSI6MTQ1", "ODU5MDYyMSwiZXhw", "aXJlX2luIjo1MDQ1", "NzYwMDAsIm1lcmts", "ZV9yb290Ijp7ImN0", "aW1lIjoxNDU4NTkw", "NTgzLCJoYXNoIjoi", "ODQ0ZWRkNGU0OTQ3MWUzNWQxZTFkOTM5", "YTc0ZjUwMDc5Nzg3NzljMTAwYzY1NGE2OGI1NDNhYzY2Y2Nl", "YTQ1MGFjNTllNmY3Yjc4ZGZiN2MyYzdjMmYwMzJiYTA2Mzdj", "MzVjZDk1ZGYyZmRiNjFlNjgxMjVmNDkxNjVlZDkwNzMiLCJz", "ZXFubyI6NDE3Mjk5", "fSwicHJldiI6Ijdm", "NWFkMGZlZmQxNjM4", "ZjBlOTc1MTk3NzA5YTk2OTVkZmQ1NzU0", "MTA4NTYxZGUzMDM0ODc2NDcxODdhMDky", "YzUiLCJzZXFubyI6", "OSwidGFnIjoic2lnbmF0dXJlIn2jc2ln", "xEDDVCB/SdOzo+Bz", "nIUCCa5DgISbH+0n", "oUjyAJ4r0sH/tj8l", "YNpHw3WR93SBCufe", "Elsl7KrxVdg5qU5A", "DYj26wgOqHNpZ190", "eXBlIKN0YWfNAgKndmVyc2lvbgE="),
		"in XCBuild.XCBBuildServiceSession.setSystemInfo(operatingSystemVersion: __C.NSOperatingSystemVersion, productBuildVersion: Swift.String, nativeArchitecture: Swift.String, completion: (Swift.Bool) -> ()) -> ()",
	},
	"facebook-page-access-token": {
		"eaaaC0b75a9329fded2ffa9a02b47e0117831b82",
		"\"strict-uri-encode@npm:^2.0.0\":\n  version: 2.0.0\n  resolution: \"strict-uri-encode@npm:2.0.0\"\n  checksum: eaac4cf978b6fbd480f1092cab8b233c9b949bcabfc9b598dd79a758f7243c28765ef7639c876fa72940dac687181b35486ea01ff7df3e65ce3848c64822c581\n  languageName: node\n  linkType: hard",
	},
	"flyio-access-token": {
		"resource \"doppler_integration_flyio\" \"prod\" {\n  name    = \"TF Fly.io\"\n  api_key = \"fo1_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"\n}",
		"pub const MINIDUMP_SYSMEMINFO1_PERF_CCTOTALDIRTYPAGES_CCDIRTYPAGETHRESHOLD: u32 = 4u32;",
		cat("<input type=\"hidden\" name=\"authenticity_token\" value=\"7SWa-Fo1_hsC6oov", "fBsJFLGPUl2EhkSW", "PbJhWANwgaJWBDl1", "vxd9VNqXTNAefsJq", "zIRYaZEfYZLffa31rw8zJA\" autocomplete=\"off\" />"),
		cat("signature\":\"I7l2ZXhw9ajjIE2w9tjHNvYjcHg7E2ql", "dMMhoQKjborcWIj8", "c40rMj83venoy6gX", "sg6V6B7dlBWxUmzY", "JR3lJKGECtCSM5Bq", "BvWhL6wX2CN2lZlv", "wNCyPjG4PCt5MAK1", "yV1Xv4fqfz8EfT_U49vOzfM1a_nfhXOz", "rvdg9XgLkAotWBI3", "1vPKjMBrvPqiLcZ1", "2MDNTSK7ubRpVaeh", "SNxiGYHpLhWTkun9", "qm_APYYXJBjhJYke", "j50Qcp7Ou8fs3kH0", "2prYIJt4JbWelr5v", "UDkgMH3AwEx1eYu5", "NI_8sESlqosl1nhS", "Dx7zq3X1FV1iJlAY", "CNwGWzW1tjo8PCaJ", "rIHVZZnhBPMN-6ah", "mOpKb8GViqd4fCQu", "Ne4VUSOeJg8i97kM", "uk-4r7hwIubR0XfC", "Gzxr7uGDQBdFANi3", "c4dLlzBAJNifa6b_", "hT4Xzqja6RCFSv6Cnalyx3hbSkjbyThn", "XFavJIiR7cvgTcdE", "Cg9VxkaxqqRhfAkL", "AS3hpXQAIYL_bw61", "M3LN37WHwdgxN_6y", "ZhbSbOsYPmTxiWvdlDaCP_iaCgXgJNfd", "Q6kep_I89slynE9g", "dDZ6NSjFJH2Soml4", "pR6HnQKPjA3OpoTw", "PSmZjxXY5I78xvrR", "qRkjdnVzeufqG8Ly", "A-sAEtC0G_312JOx", "V4GZINquPGk1qFx8WN59Rxw28Tg\","),
		cat("<p><span class=\"emoji\">🗣️</span> Adobe illustrator软件基础精讲课程<br><br><span class=\"emoji\">🏷️</span> <a href=\"https://t.me/abskoop/8565?q=%23%E8%AE%BE%E8%AE%A1%E5%B8%88\">#设计师</a> <a href=\"https://t.me/abskoop/8565?q=%23%E8%B5%84%E6%BA%90\">#资源</a> <a href=\"https://t.me/abskoop/8565?q=%23%E5%A4%B8%E5%85%8B%E7%BD%91%E7%9B%98\">#夸克网盘</a><br><br><span class=\"emoji\">👉</span> <a href=\"https://www.ahhhhfs.com/62409/\" target=\"_blank\" rel=\"noopener\">https://www.ahhhhfs.com/62409/</a></p><img src=\"https://cdn5.cdn-telegram.org/file/uGoDMy0", "VXMbL1nki9OT0VbJ", "YtfURvDNLurptsQV", "uhuzF45tNfm2_z5w", "gR7CnL7lTZ4bbotj", "XZtiLWvolNQqWBRF", "WkcidtzSyhWvta9y", "PB3E2uyvfJvGpdit", "kaLVIiCCXt9BhFBE", "dgkXa8ODaM7geHK3", "pW0tmO_IViHBnG8V", "ZqVfDpaQW0W9IRAU", "wGv2mPZWVRysPJyD", "SIuY9b-_3ElUml-X", "lpm1r8EDcm9Q2WCT", "COYur7Gmef4imQ5D", "-DLTviqmoONgQDLA", "10WVS3CApXBK4ADS", "joIUeMck62owtjEl", "SXnEYMaSGI_OE3B2", "1QplsspPbPlXVUBScLfLOFb9tn-34tw.jpg\" width=\"800\" height=\"533\" referrerpolicy=\"no-referrer\">"),
	},
	"gcp-api-key": {
		cat("GWw4hjABFzZCGiRp", "mlDyDdo87Jn9BN9T", "HUA47muVRNunLxsa", "82tMAdvmrhOqNkRK", "iYMEAFbTJAIzaTes", "b6Tscfcni8vIpWZq", "NCXFDFslJtVSvFDq"),
		cat("AIzaTesb6Tscfcni", "8vIpWZqNCXFDFslJtVSvFDqabcd123"),
		"apiKey: \"AIzaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
		"AIZASYCO2CXRMC9ELSKLHLHRMBSWDEVEDZTLO2O",
	},
	"generic-api-key": {
		"\"accessor\":\"rA1wk0Y45YCufyfq\",",
		"report_access_id: e8e4df51-2054-49b0-ab1c-516ac95c691d",
		"accessibilityYesOptionId = \"0736f5ef-7e88-499a-80cc-90c85d2a5180\"",
		"_RandomAccessIterator>\n_LIBCPP_CONSTEXPR_AFTER_CXX11 ",
		"this.ultraPictureBox1.Name = \"ultraPictureBox1\";",
		"rapidstring:marm64-uwp=fail",
		"event-bus-message-api:rc0.15.0_20231217_1420-SNAPSHOT'",
		"COMMUNICATION_API_VERSION=rc0.13.0_20230412_0712-SNAPSHOT",
		"MantleAPI_version=9a038989604e8da62ecddbe2094b16ce1b778be1",
		"[DEBUG]\t\torg.slf4j.slf4j-api:jar:1.7.8.:compile (version managed from default)",
		"[DEBUG]\t\torg.neo4j.neo4j-graphdb-api:jar:3.5.12:test",
		"apiUrl=apigee.corpint.com",
		"X-API-Name\": \"NRG0-Hermes-INTERNAL-API\",",
		"author = \"james.fake@ymail.com\",",
		"X-MS-Exchange-Organization-AuthSource: sm02915.int.contoso.com",
		"Authentication-Results: 5h.ca.iphmx.com",
		cat("withCredentials([usernamePassword(cred", "entialsId: '29f63271-dc2f-4734-8221-5b31b5169bac', usernameVariable: 'USERNAME', passwordVariable: 'PASSWORD')]) {"),
		cat("cred", "entialsId: 'ff083f76-7804-4ef1-80e4-fe975bb9141b'"),
		cat("jobC", "redentialsId: 'f4aeb6bc-2a25-458a-8111-9be9e502c0e7'"),
		cat("  \"cred", "entialId\": \"B9mTcFSck2LzJO2S3ols63\","),
		"environment {\n\tCREDENTIALS_ID = \"K8S_CRED\"\n}",
		cat("dev.cred", "entials.url=dev-lb1.api.f4ke.com:5215"),
		"keyword: \"Befaehigung_P2\"",
		cat("public_key = \"9Cnzj4p4WGeKLs1P", "t8QuKUpRKfFLfRYC9AIKjbJTWit\""),
		"pub const X509_pubkey_st = struct_X509_pubkey_st;",
		"|| pIdxKey->default_rc==0",
		"monkeys-audio:mx64-uwp=fail",
		"<entry key=\"jetbrains.mps.v8_elimination\" value=\"executed\" />",
		"minisat-master-keying:x64-uwp=fail",
		"IceSSL.KeyFile=s_rsa1024_priv.pem",
		"\"bucket_key\": \"SalesResults-1.2\"",
		"<key tag=\"SecurityIdentifier\" name=\"SecurityIdentifier\" type=\"STRING\" />",
		"schemaKey = 'DOC_Vector_5_32'",
		"sequenceKey = \"18\"",
		"app.keystore.file=env/cert.p12",
		"-DKEYTAB_FILE=/tmp/app.keytab",
		"\tdoc.Security.KeySize = PdfEncryptionKeySize.Key128Bit;",
		"o.keySelector=n,o.haKey=!1,",
		"                                \"key_name\": \"prod5zyxlmy-cmk\",",
		"                                \"kms_key_id\": \"555ea4a3-d53a-4412-9c66-3a7cb667b0d6\",",
		"\t\"key_vault_name\": \"web21prqodx24021\",",
		cat("  keyVaultToStoreS", "ecrets: cmp2-qat-1208358310"),
		cat(",apiK", "ey:\"6fe4476ee5a1832882e326b506d14126\","),
		"const validKeyChars = \"0123456789abcdefghijklmnopqrstuvwxyz_-.\"",
		"const keyStr = \"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789\"",
		"key_length = XSalsa20.key_length",
		"pub const SN_id_Gost28147_89_None_KeyMeshing = \"id-Gost28147-89-None-KeyMeshing\"",
		"KeyPair = X25519.KeyPair",
		"BlindKeySignatures = Ed25519.BlindKeySignatures",
		"AVEncVideoMaxKeyframeDistance, \"2987123a-ba93-4704-b489-ec1e5f25292c\"",
		"            keyPressed = kVK_Return.u16",
		"timezone_mapping = {\n    \"Turkey Standard Time\": \"Europe/Istanbul\",\n}",
		"password combination.\n\nR5: Regulatory--21",
		"PuttyPassword=0",
		cat("LLM_SECR", "ET_NAME = \"NEXUS-GPT4-API-KEY\""),
		"  <UserSecretsId>79a3edd0-2092-40a2-a04d-dcb46d5ca9ed</UserSecretsId>",
		cat("secr", "et_length = X25519.secret_length"),
		"secretSize must be >= XXH3_SECRET_SIZE_MIN",
		"# get build time secret for authentication\n#RUN --mount=type=secret,id=jfrog_secret \\\n#    JFROG_SECRET = $(cat /run/secrets/jfrog_secret) && \\",
		"    access_token_url='https://github.com/login/oauth/access_token',",
		cat("publicTo", "ken = \"9Cnzj4p4WGeKLs1P", "t8QuKUpRKfFLfRYC9AIKjbJTWit\""),
		"<SourceFile SourceLocation=\"F:\\Extracts\\\" TokenFile=\"RTL_INST_CODE.cer\">",
		cat("notes            = \"Maven - io.jsonwebto", "ken:jjwt-jackson-0.11.2\""),
		cat("csrf-tok", "en=Mj2qykJO5rELyHge", "zQ69nzUX0i3OH67V", "7+V4eUrLfpuyOuxm", "iW9rhROG/Whikle1", "5syazJOkrjJa3U2AbhIvUw=="),
		"clientId = \"73082700-1f09-405b-80d0-3131bfd6272d\"",
		"GITHUB_API_KEY=\nDYNATRACE_API_KEY=",
		"snowflake.password=\njdbc.snowflake.url=",
		"import { chain_Anvil1_Key, chain_Anvil2_Key } from '../blockchain-tests/pallets/supported-chains/consts';",
		"SRCREV_moby = \"43fc912ef59a83054ea7f6706df4d53a7dea4d80\"",
		"LIC_FILES_CHKSUM = \"file://${WORKDIR}/license.html;md5=5c94767cedb5d6987c902ac850ded2c6\"",
	},
	"github-app-token": {
		"ghu_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
		"ghs_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	},
	"github-fine-grained-pat": {
		"github_pat_xxxxxxxxxxxxxxxxxxxxxx_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	},
	"github-oauth": {
		"gho_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	},
	"github-pat": {
		"ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	},
	"github-refresh-token": {
		"ghr_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	},
	"gitlab-pat": {
		"glpat-XXXXXXXXXXX-XXXXXXXX",
	},
	"gitlab-pat-routable": {
		"glpat-xxxxxxxx-xxxxxxxxxxxxxxxxxx.xxxxxxxxx",
	},
	"gitlab-ptt": {
		"glptt-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	},
	"gitlab-rrt": {
		"GR134894112312312312312312312",
		"GR1348941XXXXXXXXXXXXXXXXXXXX",
	},
	"gitlab-runner-authentication-token-routable": {
		"glrt-tx_xxxxxxxxxxxxxxxxxxxxxxxxxxx.xxxxxxxxx",
	},
	"grafana-cloud-api-token": {
		"glc_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
		"   API_KEY=\"glc_111111111111111111111111111111111111111111=\"",
		"static void GLC_CreateLightmapTextureArray(void);\nstatic void GLC_CreateLightmapTexturesIndividual(void);\n\nvoid GLC_UploadLightmap(int textureUnit, int lightmapnum);",
		"// Alias models\nvoid GLC_StateBeginUnderwaterAliasModelCaustics(texture_ref base_texture, texture_ref caustics_texture)\n{",
	},
	"grafana-service-account-token": {
		"glsa_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX_AAAAAAAA",
	},
	"hashicorp-tf-api-token": {
		"token        = \"xxxxxxxxxxxxxx.atlasv1.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"",
	},
	"huggingface-access-token": {
		"- (id)hf_requiredCharacteristicTypesForDisplayMetadata;",
		cat("amazon.de#@#div[data-cel-widget=\"desktop-rhf_SponsoredProductsRemoteRHFSearchEXPS", "ubsK2ClickPagination\"]"),
		"                            _kHMSymptomhf_generatedByHomeAppForDebuggingPurposesKey,",
		"        os.environ.get(\"HF_AUTH_TOKEN\",\n\"hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"),",
	},
	"huggingface-organization-api-token": {
		"public static final String API_ORG_EXIST = \"APIOrganizationExist\";",
		"const api_org_controller = require('../../controllers/api/index').organizations;",
		"You should see a token hf_xxxxx (old tokens are api_XXXXXXXX or api_org_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx).",
	},
	"infracost-api-token": {
		"ico-XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
		"http://assets.r7.com/assets/media_box_tv_tres_colunas/video_box.ico-7a388b69018576d24b59331fd60aab0c.png",
		"https://explosivelab.notion.site/Pianificazione-Nerdz-Ng-pubblico-1bc826ecc0994dd8915be97fc3489cde?pvs=74",
		cat("http://ece252-2.uwaterloo.ca:2540/image?q=gAAAAABdHkoqb9Za", "J3q4dlzEvTgG9WYw", "KcD9Aw7OUXeFicO-", "5M5IdNDjHBpKw7KB", "K3nCVqtuga4yzUaF", "EpJn8BqA1LzZprIJBw=="),
	},
	"jwt-base64": {
		cat("-----BEGIN PGP PUBLIC KEY BLOCK-----\nVersion: GnuPG/MacGPG2 v2\nComment: GPGTools - https://gpgtools.org\n\nmQENBFOrMNcBCAC+", "gLI4s3bUkobS5NpO", "QbWfjWXbqC0Ixpc5", "bZYDOvsmfstmswna\nUWUXkRH9RONabzrA", "u4TGvW0f5DkC2fuW", "WHJhZWEccn+VE83+", "avMZN4/mzldSXPNX\nA6F7+wHb1DjG+FCD", "cxMghkwDjGc16LOt", "ZGufUo5iRQaC5pmN", "BOgDWdiObGPKOTEL\n/uU8zLtKi2cibbkh", "Rm22IGOzGyZMZN6z", "vEtPzlCp3eZEGMW0", "Ig+kbl6SaSDrSJNK\nwElYcr/kJ9QF6CQ2", "iwZCGeL2jH5QaOi5", "uj1LXONpCd9nPeyD", "Xc+Z20gXZiqkwRLc\nIBPKza6hq/+4nwHB", "q8DNLv0W4xNC59jL", "bIhpABEBAAG0LEZyYW5rIE5vdGhhZnQg\nPGZub3RoYWZ0QGFs", "dW1uaS5zdGFuZm9y", "ZC5lZHU+iQE9BBMB", "CgAnBQJTqzDXAhsD\nBQkHhh+ABQsJCAcDBRUKCQgLBRYCAwEA", "Ah4BAheAAAoJECqYOYG1w7FJOr4IAK8x\nec4jbjd6jkKe0YJG", "dPzg6TM73ISV5VrU", "lJX7O3jgxHB4M8KI", "HN/8A/+ZxLk7WM96\niq0C8atWHkCkQBtN", "duWhzAFccQlpxrrb", "18T5/oItcrmX9Dx2", "H5WeIl4WAoqe0MTk\niMPv29RMMH9RJvXL0ihuuH4Z0VxV5nur", "I9QmGzG69QOzfP9qY1EfQEceO7OqXXvY\nvvBEUbmWshLuHJ6t", "OQY5ib3+aLO7m+yJ", "TgJ7s6DHBDqLhqJP", "W0g7jiJcrDhYXsoS\nJMMhMdUhckeZfTXm", "1N3Dc+/t9/E8NZjd", "Z2q/ZZzvygC4mu0u", "ihwBKFqoFvXCHRaW\nRf4uYxE+/Upna/mb", "XQi5AQ0EU6sw1wEI", "ALSp9Cc4t/F2k+rw", "EfEMXihXLcLM9Dmh\nukz++kMSCSuq4QHE", "+I4rLda/lVSNJCXa", "XrGVkzJuzmpEeQFd", "hr6nLW9ZYhzK8FIc\nYyfsYTQxXUVf5W4e", "/XfKNoG9lrwQd5XH", "xJTBJ57XjjoWJYPQ", "69NWH8622foOBpux\nxewgR2LEFgl+ksu7", "aQL4cQif6D3dko3E", "iIf1t0LDBXxFEREF", "Cg+vkDFsDIW5bdaI\nmDYwewGj7dAPLuo0", "sx1We+uBxb+j30xw", "/ASDOBhO3ratQWs+", "4w2FC7gw7cuf0CJC\n/hMEw8nloGsIbqBm", "AnLdlQBxkfFG9DqR", "BNdSUM8xI66F0eGa", "aPHJ/S8AEQEAAYkB\nJQQYAQoADwUCU6sw1wIbDAUJB4YfgAAK", "CRAqmDmBtcOxSZvv", "B/4w6S5YZQUmDVYK\n9HPOm49qWxGPd5dL", "Hr2g388sJ4LDK98Q", "9oicHgf2R35OXTyq", "hv4kFJL3eukQ6oLW\nQOqQKLRycrQUu7eS", "ESAiVmJ1gbuXLAWJ", "mvUABGSYzj3BjWQR", "exYW/MZ51XqNftF9\noOSAoFWrdqeJbHox", "PTXIb6P8EWk4Ei2j", "2bSIfBBSbBMSB6Kfk9IjpISM8+97RS5o\n6605rmM5MY1Lz8cq", "8AZIYJs/MnUCZrpQ", "0c9QSWrflHAeWAy6", "xMGfdSynbEExQ4z8\nAIfKWMro74nRFbAn", "v/BzrF2R8uHmdE7T", "6q9ZZsAydlaxQbdmyhCeGAdw93CwAypb\nvHVobJ8A\n=mIC1\n-----END PGP PUBLIC KEY BLOCK-----"),
	},
	"mailchimp-api-key": {
		cat("MailchimpSDK.initialize(token: 3012", "a5754bbd716926f99c028f7ea428-us18)"),
	},
	"notion-api-token": {
		"ntn_12345678901",
		"ntn_123456789012345678901234567890123456789012345678901234567890",
		"ntn_12345678901abc",
	},
	"octopus-deploy-api-key": {
		"msgstr \"GSSAPI-VIRHEKAPSELOINTIMERKKIJONO.\"",
		"https://sonarcloud.io/api/project_badges/measure?project=Garden-Coin_API-CalculadoraDeInvestimentos&metric=alert_status",
		"https://fog-ringer-f42.notion.site/API-BD80F56CDC1441E6BF6011AB6D852875",
		"<iframe src=\"./archive/gifs/api-c99e353f761d318322c853c03e.gif\"> </iframe>",
	},
	"okta-access-token": {
		"oktaKey = 00000000000000000000000000000000000TUVWXYZ",
		cat("rookTable = 0023452Lllk2KqjL", "BvaxANWEgTd7bqjsxjo8aZj0wd"),
	},
	"openshift-user-token": {
		cat("--set kraken.kubeconfig.token.toke", "n=\"sha256~XXXXXXXXXX_PUT_YOUR_TOKEN_HERE_XXXXXXXXXXXX\" \\"),
		cat("oc login --token=sha2", "56~_xxxxxx_xxxxxxxxxxxxxxxxxxxxxx-xxxxxxxxxx-X \\\n    --server=https://api.${zone}.appuio.cloud:6443"),
	},
	"perplexity-api-key": {
		"PERPLEXITY_API_KEY=pplx-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	},
	"prefect-api-token": {
		"PREFECT_API_KEY = \"pnu_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX\"",
	},
	"privateai-api-token": {
		"const privateaiToken = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\";",
	},
	"pulumi-api-token": {
		"                        <img src=\"./assets/vipul-f0eb1acf0da84c06a50c5b2c59932001997786b176dec02bd16128ee9ea83628.png\" alt=\"\" class=\"w-16 h-16 rounded-full\">",
	},
	"readme-api-token": {
		"const API_KEY = 'rdme_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX';",
	},
	"slack-config-access-token": {
		cat("xoxe.xoxp-1-SlackAppC", "onfigurationAccessTokenHere"),
		"xoxe.xoxp-1-RANDOMSTRINGHERE",
		"xoxe.xoxp-1-initial",
	},
	"slack-config-refresh-token": {
		"xoxe-1-xxx",
		"XOxE-RROAmw, Home and Garden, 5:24, 20120323",
	},
	"slack-legacy-token": {
		"https://indieweb.org/images/3/35/2018-250-xoxo-indieweb-1.jpg",
		cat("https://lh3.googleusercontent.com/-tWXjX3LUD6w", "/Ua4La_N5E2I/AAAAAAAAACg/qcm19xb", "EYa4/s640/EXO-XO", "XO-teaser-exo-k-34521098-720-516.jpg"),
	},
	"slack-legacy-workspace-token": {
		"https://github.com/xoxa-nyc/xoxa-nyc.github.io/blob/master/README.md",
	},
	"slack-user-token": {
		cat("\"toke", "n1\": \"xoxp-1234567890\""),
		"\"token2\": \"xoxp-XXXXXXXXXX-XXXXXXXXXX-XXXXXXXXXXX-XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX\"",
		cat("\"toke", "n3\": \"xoxp-1234-1234-1234-4ddbc191d40ee098cbaae6f3523ada2d\""),
		cat("\"toke", "n4\": \"xoxp-572370529330-573807301142-572331691188-####################\""),
	},
	"sourcegraph-access-token": {
		"sgp_5555555dAAAAA7777777CcccCFaaaaaaaaaaaaaa",
		cat("sgp_local_d45b6G", "86aBb0F2Cee943902dbaDBCFCFDD1dA089"),
		"sgp_652d9a2e48FC7E!FcDbEA1BC2E2A6CE23cFe7F7D",
		cat("sgp_78Ad84a5B6e8", "A2fE5B_4085FB0ccaDDd29DB66Fd7FE9bA2C1cdCE8400CD"),
		"BcAeb6640ad7DAD46AD73687946Ce85047d5C9Bb",
	},
	"square-access-token": {
		"aws-cli@sha256:eaaa7b11777babe28e6133a8b19ff71cea687e0d7f05158dee95a71f76ce3d00",
	},
	"stripe-access-token": {
		cat("nonMatchingT", "oken := \"task_test_q8Zr2L", "mX9vB4nT7kP1sW5yc3Hd6Jf0\""),
	},
	"sumologic-access-id": {
		"- (NSNumber *)sumOfProperty:(NSString *)property;",
		"- (NSInteger)sumOfValuesInRange:(NSRange)range;",
		"+ (unsigned char)byteChecksumOfData:(id)arg1;",
		"sumOfExposures = sumOfExposures;",
		".si-sumologic.si--color::before { color: #000099; }",
		"/// Based on the SumoLogic keyword syntax:",
		"sumologic_access_id         = \"\"",
		"SUMOLOGIC_ACCESSID: ${SUMOLOGIC_ACCESSID}",
		"export SUMOLOGIC_ACCESSID=XXXXXXXXXXXXXX",
		"sumObj = suGyI5imvADdvU",
	},
	"sumologic-access-token": {
		"#   SUMO_ACCESS_KEY=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
		"-e SUMO_ACCESS_KEY=`etcdctl get /sumologic_secret`",
		"SUMO_ACCESS_KEY={SumoAccessKey}",
		"SUMO_ACCESS_KEY=${SUMO_ACCESS_KEY:=$2}",
		"sumo_access_key   = \"<SUMOLOGIC ACCESS KEY>\"",
		"SUMO_ACCESS_KEY: AbCeFG123",
		cat("sumOfExposures = 3Kof2VffNQ0QgYIhXUPJosVlCaQKm2hf", "pWE6F1fT9YGY74bl", "QBIPsrkCcf1TwKE5;"),
	},
	"vault-service-token": {
		"  credentials: new AWS.SharedIniFileCredentials({ profile: '<YOUR_PROFILE>' })",
		"INFO 4 --- [           main] o.s.b.f.s.DefaultListableBeanFactory     : Overriding bean definition for bean",
		"s.xxxxxxxxxxxxxxxxxxxxxxxx",
		"s.THISSTRINGISALLUPPERCASE",
		"s.thisstringisalllowercase",
		"s.AcceptanceTimeoutSeconds ",
		"s.makeKubeConfigController = args",
		"hvs.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	},
}

var gitleaksGeneratedShapes = map[string][]string{
	"adafruit-api-key": {
		cat("adafruit_api_tok", "en = \"i-q6RGNP8pnOZ-SN", "awy5j5PL6qTALbDe\""),
	},
	"adobe-client-id": {
		cat("adobe_api_to", "ken = \"E1Aec6Bb1f7C80B2aed0dC1f87C141Cb\""),
	},
	"adobe-client-secret": {
		cat("x_api_token = \"p8e-", "4dlp622VaHZ9Dzi1", "kVLO14fbXdopwGGe\""),
	},
	"airtable-api-key": {
		cat("airtable_api_token = \"gVAq", "fhuqHqttiaaqa\""),
	},
	"airtable-personnal-access-token": {
		cat("airtable_api_tok", "en = \"patjV2EHFevTOyTvH.9d27417ee21cde536e7a977643852a67b1546e8d079fd8e0322df8590f73e5c7\""),
	},
	"algolia-api-key": {
		cat("algolia_api_toke", "n = \"bTNaxBprzq7F3XBU", "LEC4wxkt1EkJOmUc\""),
	},
	"alibaba-access-key-id": {
		cat("x_api_token = \"LTAI", "Rw4ZpyI5Rw93FU7myutX\""),
	},
	"alibaba-secret-key": {
		cat("alibaba_api_toke", "n = \"dkz13vNARxXWFMrYcx8MCYDb46HPYI\""),
	},
	"artifactory-api-key": {
		cat("x_api_token = \"AKCp", "spmA15ECs3qwg6G6", "wtoCSqRj4hUp2aH8", "j4fh26AeY1dGvavw", "dgwH9oSdh24rUU3x308cH\""),
	},
	"artifactory-reference-token": {
		cat("x_api_token = \"cmVm", "d2ZKcyCx6Pv7m2UF", "nxOSlmCf9IgLMvaZ", "oZsadLsGNQndAgONF7c27JsT0Jkv\""),
	},
	"asana-client-id": {
		cat("asana_api_token = \"1866", "260619726660\""),
	},
	"asana-client-secret": {
		cat("asana_api_to", "ken = \"Z6tINkzgq3qRJRnU", "rO7NXrPtGBrLchOO\""),
	},
	"authress-service-client-access-key": {
		cat("x_api_token = \"sc_r", "Fho2.VgtCwU.acc_H8awxAJJu0.jqRqPCNg0WvIx6Sy", "FxuelHxRPtKki44nz\""),
	},
	"aws-access-token": {
		cat("x_api_token = \"ASIA", "Q7WX2MZ4K3TR5VYP\""),
	},
	"beamer-api-token": {
		cat("beamer_api_t", "oken = \"B_5izkmT7I88fxrc", "k2gN7bGBzPt9KR17yYvKduyW-CeTOn\""),
	},
	"bitbucket-client-id": {
		cat("bitbucket_api_to", "ken = \"UTuzq9Jm0OoWp0C5", "ArvvYRiwQtMAsKnj\""),
	},
	"bitbucket-client-secret": {
		cat("bitbucket_api_to", "ken = \"ELB-vIpfbggr9qO-", "VJhuKSUhcQO9LuytEijPigGan0=9TuZpJfmG5nSUl91eH2hE\""),
	},
	"bittrex-access-key": {
		cat("bittrex_api_toke", "n = \"FiDWz4Jb1GWRYiLGBYYYWXdcZBLdcbrD\""),
	},
	"bittrex-secret-key": {
		cat("bittrex_api_toke", "n = \"TO5o3VyY1bRtTe3HE3TEFof1QHLEh4Hn\""),
	},
	"cisco-meraki-api-key": {
		cat("meraki_api_t", "oken = \"3cbe362c3d27b1dcb7a8d9e3bd866db2f72d850e\""),
	},
	"clojars-api-token": {
		cat("x_api_token = \"cloJ", "aRs_Nyb2egzBK9r7", "tgVRZR0CIGW27f4q", "CDkAiz2QJi0ccpwQ", "CEvDso56xobAvPB0\""),
	},
	"cloudflare-api-key": {
		cat("cloudflare_api_t", "oken = \"v0cftiXTFc72g_Bn", "Cxx7Y9VFIO2R1qgwzYcCnpoK\""),
	},
	"cloudflare-global-api-key": {
		cat("cloudflare_api_t", "oken = \"CdFFBcD24eCCC6E7eD9DdADdffADEF263A62A\""),
	},
	"codecov-access-token": {
		cat("codecov_api_toke", "n = \"RszvZtUR7zJe2rpr", "asTKiunhFZrum62S\""),
	},
	"cohere-api-token": {
		cat("cohere_api_t", "oken = \"IxtoENQGZ4E0Fsln", "3vYbROrVsiwa148zLZlxhwZt\""),
	},
	"coinbase-access-token": {
		cat("coinbase_api_tok", "en = \"bzvWITuEdw3iIIdf", "uyEjVUkf-yGuD4ft", "bRx6wm-kbcEa2tOs", "T9SdtCeBEE1udJ5N\""),
	},
	"confluent-access-token": {
		cat("confluent_api_to", "ken = \"h4ro05tM2l8WbvjA\""),
	},
	"confluent-secret-key": {
		cat("confluent_api_to", "ken = \"Txx10G9Wu14Uesdd", "wlVcfQuPsDME5GEk", "guobfaWNpNl5etTj", "mbSzQiFRuDubWY30\""),
	},
	"contentful-delivery-api-token": {
		cat("contentful_api_t", "oken = \"RDOsEnNTx8M8hjB-", "kWEtiFyNgmzg5NmLryKamZfAfwV\""),
	},
	"datadog-access-token": {
		cat("datadog_api_toke", "n = \"uIBXCd4XCBAJhJ7P", "ZCxRAwyj6nr56gmJME9ZyZLr\""),
	},
	"defined-networking-api-token": {
		cat("dnkey_api_token = \"dNkEy-fBrNpdWmxf", "jdWow-LCqfrbl0gv", "-t4C8fZma2g5TVlA", "KnZxKgqcZ6h9GJK8", "jyH89egV4i9JrHSz0Z=Iq\""),
	},
	"digitalocean-access-token": {
		cat("x_api_token = \"doo_", "v1_15029519d276b00acff5217179aa39df2c77cfd4abad9ce76aec89dde27030bf\""),
	},
	"digitalocean-pat": {
		cat("x_api_token = \"dop_", "v1_4b8d273829a613607ccde3acb67757f6318c025aa7804a472eba424047eacce8\""),
	},
	"digitalocean-refresh-token": {
		cat("x_api_token = \"dor_", "v1_cAB5e5abd720E0fB1fCeD66cE5CD8", "BDBDb14bb861b12434Da157f0e1034abc97\""),
	},
	"discord-api-token": {
		cat("discord_api_toke", "n = \"660c5F442fda4Ff3ea90c63b83beB1b7dF2022904b5EF65BEC70A880cAFa6DAd\""),
	},
	"discord-client-id": {
		cat("discord_api_token = \"8363", "30896134770926\""),
	},
	"discord-client-secret": {
		cat("discord_api_toke", "n = \"1tEtLZOhyxlK8P9G", "InQqoLL46EHZY30Q\""),
	},
	"doppler-api-token": {
		cat("x_api_token = \"dp.p", "t.oHVYdJVT7ovETt7g", "2ubReWTOspz4RICzPhCnq2XDYov\""),
	},
	"droneci-access-token": {
		cat("droneci_api_toke", "n = \"J7oTX43aXminlAOP", "MPktEKxBJrY7SDOW\""),
	},
	"dropbox-api-token": {
		cat("dropbox_api_toke", "n = \"h6cEi4CfQBY4BZq\""),
	},
	"dropbox-long-lived-api-token": {
		cat("dropbox_api_toke", "n = \"jPolmSwnx4EaaAaAaaAAa4F_cg5rVlvd", "EUjvdxilQx0mHANa", "fD1KGkmoWLvgod_A\""),
	},
	"dropbox-short-lived-api-token": {
		cat("dropbox_api_toke", "n = \"SL.t0Tb4Rr03rsplarn", "EUzuqzxNiutRRMiN", "DrhKjlCqKJ-EiD6X", "SzP3JMVn5azgOVCm", "TKeAsKYlvkzRgC8p", "6zD4r0voVbj0FHsQ", "BrZDBa02bFFk3F7X", "n_5iZeu3rjnX9scaMMtUctb\""),
	},
	"duffel-api-token": {
		cat("x_api_token = \"duff", "el_live_I0e_hb1m8=24v6BvYlICDzxSpS", "qPVA6lSVe5xdodiwl\""),
	},
	"dynatrace-api-token": {
		cat("x_api_token = \"dt0c", "01.M6TW4yOFjBqdZmws1SdYbh2H.P6KAhkxHlsJrbGnM", "DUzP2ZollfBunCJK", "zO56f1yCwWFFRjyG", "2saycX5DL901696U\""),
	},
	"easypost-api-token": {
		cat("x_api_token = \"EZAK", "bxZhz3YqiVgrUyTz", "B5PzskYHefa5kAmH", "raU6QV4pChNpjd3UPd2j7V\""),
	},
	"easypost-test-api-token": {
		cat("x_api_token = \"EZTK", "7Tg8PY8FdiYYac9m", "8JAzQQA2U4xDAl4p", "QjVn8u1tS8jMyH624F7Qd1\""),
	},
	"etsy-access-token": {
		cat("etsy_api_tok", "en = \"rAp9QglBe5gr3y3Ah2L2T2BZ\""),
	},
	"fastly-api-token": {
		cat("fastly_api_t", "oken = \"cER1=WumHjFlyeUJJvlcgzVk0jbWoe8v\""),
	},
	"finicity-api-token": {
		cat("finicity_api_tok", "en = \"d3c5e2dc763D6d7F3845eB96f31e0E4e\""),
	},
	"finicity-client-secret": {
		cat("finicity_api_tok", "en = \"DW1PSQAkh3qBq7qT7RyF\""),
	},
	"finnhub-access-token": {
		cat("finnhub_api_toke", "n = \"iJIbAlxbjewzN20uQtLS\""),
	},
	"flickr-access-token": {
		cat("flickr_api_token = \"vsYwmXOkiSLAqWqs", "1ujW2VktJldAJIpu\""),
	},
	"flutterwave-encryption-key": {
		cat("x_api_token = \"FLWS", "ECK_TEST-d245EFhg7f1f\""),
	},
	"flutterwave-public-key": {
		cat("x_api_token = \"FLWP", "UBK_TEST-F2gE9Ch", "DA79b8FfFbED3C87G29DaA4H4-x\""),
	},
	"flutterwave-secret-key": {
		cat("x_api_token = \"FLWS", "ECK_TEST-C2cB88A", "H7g4FGfc55Bd4DdAC8AEFDce6-X\""),
	},
	"frameio-api-token": {
		cat("x_api_token = \"fio-", "u-yU8wbm4Nk7j-upOUJ-j1JG_wuaDmluf-u=iSGSenDt-Mhc-zQN3nb_RJGl3JqJk6\""),
	},
	"freshbooks-access-token": {
		cat("freshbooks_api_t", "oken = \"ckCFG3jhMWJmNIBA", "8sW5BjYIavCykIvx", "axPrbCVzh8mOzain", "svhNVRuCz005m5j1\""),
	},
	"github-app-token": {
		cat("x_api_token = \"ghs_", "dfvKViT4JmSBVwnQ", "YT05NPk7kCPTnF8zSH9U\""),
	},
	"github-fine-grained-pat": {
		cat("x_api_token = \"github_pat_Ilhx_eRvN", "BLdIxVE3RO5kvoDq", "QklHr7yXBAFG_lmq", "i21BTXZR22Io8A6k", "MNBS6zTCQ22dLYyEK6liZwPsA\""),
	},
	"github-oauth": {
		cat("x_api_token = \"gho_", "q8Zr2LmX9vB4nT7k", "P1sW5yc3Hd6Jf0GuE4a2\""),
	},
	"github-pat": {
		cat("x_api_token = \"ghp_", "q8Zr2LmX9vB4nT7k", "P1sW5yc3Hd6Jf0GuE4a2\""),
	},
	"github-refresh-token": {
		cat("x_api_token = \"ghr_", "q8Zr2LmX9vB4nT7k", "P1sW5yc3Hd6Jf0GuE4a2\""),
	},
	"gitlab-cicd-job-token": {
		cat("x_api_token = \"glcb", "t-BmQ_JKyaitpuK41N-NeYU-rz\""),
	},
	"gitlab-deploy-token": {
		cat("x_api_token = \"gldt", "-q8Zr2LmX9vB4nT7kP1sW\""),
	},
	"gitlab-feature-flag-client-token": {
		cat("x_api_token = \"glff", "ct-DimuQFcgONdiiuKicgVh\""),
	},
	"gitlab-feed-token": {
		cat("x_api_token = \"glft", "-RZnn_2Zf5l1mMOVW39e-\""),
	},
	"gitlab-incoming-mail-token": {
		cat("x_api_token = \"glim", "t-8XYTqNxhXLAK0IIrC46Vv2JJZ\""),
	},
	"gitlab-kubernetes-agent-token": {
		cat("x_api_token = \"glag", "ent-4HFOX9fd3TYk", "c9OebqlQIxm7ciTo", "LHWvCegahcR0O2voqJsNSe\""),
	},
	"gitlab-oauth-app-secret": {
		cat("x_api_token = \"gloa", "s-n28vhcDqYCGNUZ", "cFwOPkY_OMglLK9m", "7sTk1gOAls-4wqRd", "v2R9W7czVQlNFYybTP\""),
	},
	"gitlab-pat": {
		cat("x_api_token = \"glpa", "t-q8Zr2LmX9vB4nT7kP1sW\""),
	},
	"gitlab-pat-routable": {
		cat("x_api_token = \"glpa", "t-q8Zr2LmX9vB4nT7kP1sW5yc3Hd6.01a2b3c4d\""),
	},
	"gitlab-ptt": {
		cat("x_api_token = \"glpt", "t-3f9a1c2e4b5d6f708192a3b4c5d6e7f8091a2b3c\""),
	},
	"gitlab-rrt": {
		cat("x_api_token = \"GR13", "48941q8Zr2LmX9vB4nT7kP1sW\""),
	},
	"gitlab-runner-authentication-token": {
		cat("x_api_token = \"glrt", "-q8Zr2LmX9vB4nT7kP1sW\""),
	},
	"gitlab-runner-authentication-token-routable": {
		cat("x_api_token = \"glrt", "-t1_QrbBLYIW1Ex7HXHVJv_7woZqQLI.pmcr2lqw4\""),
	},
	"gitlab-scim-token": {
		cat("x_api_token = \"glso", "at-WAfIPGuSiN4RudusNhcM\""),
	},
	"gitlab-session-cookie": {
		cat("x_api_token = \"_git", "lab_session=axvdhgo1uzpupab9sayrbvjl4huy7hm5\""),
	},
	"gitter-access-token": {
		cat("gitter_api_t", "oken = \"nl7020ORcC4mWkN3", "Es1xmjBVMkc2AZEgtJeQFL_f\""),
	},
	"gocardless-api-token": {
		cat("live_api_token = \"gocARdLESSM?=LivE", "_c7xaLY9yVLMV=rGxTgT=q3NRNOsNkMr6SWXq89Es`\""),
	},
	"grafana-api-key": {
		cat("x_api_token = \"eyjr", "iJoIQ2EnRXLuu51m", "qUWAdzc1Nhmmu7nx", "Ot8Yb8u1SwYBI40K", "sq9mj0hcaFwJdfTY7jlyiHdTW98=\""),
	},
	"harness-api-key": {
		cat("x_api_token = \"pat.", "RJAFx-1UbyP-Oae8Ia5dO6.QADMnIr4JC5lNuSV3VZIC0rw.H3thoVzOyZFmjgJM24jF\""),
	},
	"intercom-api-key": {
		cat("intercom_api_tok", "en = \"V=rSqDdHMh80uOj0tH", "c7YfJ8FRGggftalL", "F1O1282dmNm-HlDD2JmTRxqPGK\""),
	},
	"jfrog-api-key": {
		cat("jfrog_api_to", "ken = \"e88f0FnTC2KFipbn", "OxRFuSDRnX6K2bky", "RqYxW1z2thtTdH3J", "60l8ukx3y77MSBn8jRe8HciVf\""),
	},
	"jfrog-identity-token": {
		cat("jfrog_api_to", "ken = \"IBeV8o8Ulc6BZCRP", "T8581HkuR7Xg6DSD", "VRV0aCzQLow83BEZ", "FnGFnsgqpL0Pe5us\""),
	},
	"jwt-base64": {
		cat("x_api_token = \"ZXlKaGJH", "Y2lPaUXx4\\MMZye6BfLLg/py1W", "Q/korR-IBvHfrbGCuXJgta==\""),
	},
	"kraken-access-token": {
		cat("kraken_api_t", "oken = \"wbbN505hy0co2ecPUk+_JvAFXuw7cc=1c09vC4gV=4PfwcGbjCH45ue6Q", "QqmYkoP9Bvu7mYwHZnK2U8cxHt\""),
	},
	"kucoin-access-token": {
		cat("kucoin_api_t", "oken = \"1d37AFdc60eDEa6C3d679716\""),
	},
	"kucoin-secret-key": {
		cat("kucoin_api_t", "oken = \"C19FAEDC-0fFB-99dF-402C-3adD43DCb6aA\""),
	},
	"launchdarkly-access-token": {
		cat("launchdarkly_api_tok", "en = \"7hYkXc_mk6zML1_dXD4p1=9kWPDWKar5i4Sv3QXo\""),
	},
	"linear-api-key": {
		cat("x_api_token = \"lin_", "api_aHhQHYn5hqBt", "u8VXino2U2AV1fq3vqqBhdEnCh3a\""),
	},
	"linear-client-secret": {
		cat("linear_api_t", "oken = \"a81d8F6a21F503d1A7a6edecDa4D23FC\""),
	},
	"linkedin-client-id": {
		cat("linkedin_api_tok", "en = \"3hKxclThmHpFlq\""),
	},
	"linkedin-client-secret": {
		cat("linkedin_api_tok", "en = \"NJ0jE032BkV8E3Z5\""),
	},
	"lob-api-key": {
		cat("lob_api_toke", "n = \"LiVe_e8BA19655fEE8ccaFCF25d95D3CEFE908Ec\""),
	},
	"lob-pub-api-key": {
		cat("lob_api_toke", "n = \"lIVe_puB_C4519aF", "096078deaE49BFc72ef3AAcD\""),
	},
	"looker-client-id": {
		cat("looker_api_t", "oken = \"5tqoJn5M3TeIJXqE01Mj\""),
	},
	"looker-client-secret": {
		cat("looker_api_t", "oken = \"axOMeASu9HNA5dDUlKPBBJfU\""),
	},
	"mailgun-private-api-token": {
		cat("x_api_token = \"key-", "0ec52ee3be1f6eb84063a521098811d2\""),
		cat("mailgun_api_toke", "n = \"KEy-EA2cD9cB3185e7056F30Dc64a85EBD9A\""),
	},
	"mailgun-pub-key": {
		cat("mailgun_api_toke", "n = \"Pubkey-ba6ECAca1ce6c8EFFbC3A86B32C967a5\""),
	},
	"mailgun-signing-key": {
		cat("mailgun_api_toke", "n = \"7bB260bEgdC2aBdF", "A53DHh3A389dHEaA-37AfcCEG-d71e7geB\""),
	},
	"mapbox-api-token": {
		cat("mapbox_api_t", "oken = \"pK.S0ryuP5ZPIE6DPfx", "ENC9k8pxrlikQ45i", "KzReAVjfCbiHyebfVzTQBzO99Ted.m8uvgJgmzHP5QWuGI39vNN\""),
	},
	"mattermost-access-token": {
		cat("mattermost_api_t", "oken = \"xtQ0XmcOiV7TRG4Bc8Od1vQox2\""),
	},
	"messagebird-api-token": {
		cat("messagebird_api_toke", "n = \"zpotPnYYBwynhtSh6ktIX6eg2\""),
	},
	"microsoft-teams-webhook": {
		cat("x_api_token = \"http", "s://qfhk.webhook.office.com/webhookb2/6vohc8gt-zhsb-s29d-tac6-2ml10hygc53m@0bkhcchd-o9rb-ros4-0fb8-ztjxtocakxh9/IncomingWebhook/g6e9oz46t5zkdyv31hug3gjwi08fi63i/tqtkpfc4-mglp-2hya-t8th-hfoyiep02fnc\""),
	},
	"netlify-access-token": {
		cat("netlify_api_toke", "n = \"HDyAOmkKI9Y7=AduMPiVQlwYRqxvQALAD0kOzsv27\""),
	},
	"new-relic-browser-api-token": {
		cat("newrelic_api_tok", "en = \"NrJS-D587b3C9D82BcfF4ace\""),
	},
	"new-relic-insert-key": {
		cat("new-relic_api_to", "ken = \"nRii-xLYNYTMY0S0", "rbXIYJodWsbpVH4xfIcsA\""),
	},
	"new-relic-user-api-id": {
		cat("new-relic_api_to", "ken = \"ibuCYWRtD6gBGCUf", "PzTpcKMg9w8gBWuG", "5PTkneDQtXgZ4INj", "N1rQezAYpd24qlfP\""),
	},
	"new-relic-user-api-key": {
		cat("nrak_api_token = \"nEW-rElIcP?=NraK", "-ipFBYlDRDxgwIVgRgXpN8sMJDx2\\N\""),
	},
	"npm-access-token": {
		cat("x_api_token = \"npm_", "q8zr2lmx9vb4nt7kp1sw5yc3hd6jf0gue4a2\""),
	},
	"nytimes-access-token": {
		cat("nytimes_api_toke", "n = \"etBRLjL4IWfUJ009", "SBXNLipRNl3weBj-\""),
	},
	"plaid-api-token": {
		cat("plaid_api_to", "ken = \"AcceSs-SandBox-e1711F00-fF1C-928d-1Fa7-AcF3c9D9d6dd\""),
	},
	"plaid-client-id": {
		cat("plaid_api_to", "ken = \"sULPp2odcjLkKgsQHukMYBhW\""),
	},
	"plaid-secret-key": {
		cat("plaid_api_to", "ken = \"Y6s8sboRosZNQY5GQ2fe4tG1NX594y\""),
	},
	"planetscale-api-token": {
		cat("x_api_token = \"psca", "le_tkn_7ZDNmQ-Xk=wU_GL1c1OfJsRJ=Zpya.pc.\""),
	},
	"planetscale-oauth-token": {
		cat("x_api_token = \"psca", "le_oauth_d6fXOsF", "xg09_pfE-R-SRJepFrpF9L1g8\""),
	},
	"planetscale-password": {
		cat("x_api_token = \"pSca", "lE_Pw_LrxyY3xjLJY4Bd.kc662f9ar0YWHi9r3xu\""),
	},
	"postman-api-token": {
		cat("x_api_token = \"PMAK", "-d9b2d622aF7898bbc8074ea7-DeAff8e7f190cdaCe304ebfBA6D6BF0eaf\""),
	},
	"prefect-api-token": {
		cat("x_api_token = \"pnu_", "T91YqXc7cXA1AHPm", "Ef8LrPDY6vkrmIw1c97E\""),
	},
	"privateai-api-token": {
		cat("privateai_api_to", "ken = \"5dljk96o0x4qus0i1ohedkjnsybnp618\""),
	},
	"pulumi-api-token": {
		cat("x_api_token = \"pul-", "24f4b2003c657372bd0af4ce1a4c90bb717b8016\""),
	},
	"pypi-upload-token": {
		cat("x_api_token = \"pypi", "-AgEIcHlwaS5vcmc3f9a1c2e4b5d6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8\""),
	},
	"rapidapi-access-token": {
		cat("rapidapi_api_tok", "en = \"EZP5f3ejG5Zmy2Xu", "HZq47k0SpaW8XvMM", "qUO9R4sHvzNFbrSTb2\""),
	},
	"readme-api-token": {
		cat("x_api_token = \"rdme", "_gzssv8oeyf8b3py5833ekhr68pczgrooagzas3r1vmhsmru7ab7st6591p7hf553wvca1t\""),
	},
	"rubygems-api-token": {
		cat("x_api_token = \"ruby", "gems_976b901530dfcd1008932ad561d0dfe205b562171424202d\""),
	},
	"sendbird-access-id": {
		cat("sendbird_api_tok", "en = \"8b4358f1-7eE5-268f-a342-fba1dDE2ABaE\""),
	},
	"sendbird-access-token": {
		cat("sendbird_api_tok", "en = \"a379e4D0BACd430E925384ACf8ea4AfFDfb6a7Cb\""),
	},
	"sendgrid-api-token": {
		cat("x_api_token = \"SG.q", "8Zr2LmX9vB4nT7kP1sW5y.c3Hd6Jf0GuE4a2Qw", "8Er6Ty1Ui5Op9As3Df7Gh2Jk4Lz\""),
	},
	"sendinblue-api-token": {
		cat("x_api_token = \"xkey", "sib-412c36b822b17bd05b59f9806fb25110609078a2dba4a3e7ccdfe9ac0a6713dc-oOVHRxozNk2ilb9G\""),
	},
	"sentry-access-token": {
		cat("sentry_api_t", "oken = \"CDDCccCF5E1BD4472a1Bd29e23A6cdd6685C156E04E0EBc8eD6eAF2ebB6EEC16\""),
	},
	"sentry-user-token": {
		cat("x_api_token = \"sntr", "yu_ad17624bd15a1ffe51e57e4bf872add15c49de078517c64a7ba1017df742409e\""),
	},
	"settlemint-application-access-token": {
		cat("x_api_token = \"sm_a", "at_eEMByKgvSnC8qbSx\""),
	},
	"settlemint-personal-access-token": {
		cat("x_api_token = \"sm_p", "at_pyrbiMvrvKGddszW\""),
	},
	"settlemint-service-access-token": {
		cat("x_api_token = \"sm_s", "at_6BSqprfGJXhHHQFl\""),
	},
	"shippo-api-token": {
		cat("x_api_token = \"ship", "po_live_Fd62ec5F", "1E5DE66bcBa147d2dC2cD09b8e4FE23D\""),
	},
	"shopify-access-token": {
		cat("x_api_token = \"shpa", "t_3bF4FcdaD600a5CCFF24EF0d1Df6569a\""),
	},
	"shopify-custom-access-token": {
		cat("x_api_token = \"shpc", "a_2c8EC7BB40DCA3bcE3aebA79CC27a43e\""),
	},
	"shopify-private-app-access-token": {
		cat("x_api_token = \"shpp", "a_29210da9A220DcBdcdf5259FBD4AbE41\""),
	},
	"shopify-shared-secret": {
		cat("x_api_token = \"shps", "s_ebe1f5A0645Cbc64Fe2a28a0BBB4dF54\""),
	},
	"slack-legacy-workspace-token": {
		cat("x_api_token = \"xoxa", "-q8Zr2LmX9vB4nT7kP1sW\""),
	},
	"slack-webhook-url": {
		cat("x_api_token = \"https://hook", "s.slack.com/services/T0Q", "8ZR2LM/B4NT7KP1S", "/q8Zr2LmX9vB4nT7kP1sW5yc3\""),
	},
	"squarespace-access-token": {
		cat("squarespace_api_toke", "n = \"19633913-3B6F-bDcD-4009-c1EbB1DB0AfD\""),
	},
	"telegram-bot-api-token": {
		cat("telegr_api_t", "oken = \"635545:ADGNwypD8LXj2Nzw", "tm5K1gGueb1mR4mubXN\""),
	},
	"travisci-access-token": {
		cat("travis_api_t", "oken = \"47NttCg9oGiSpMm9AAIyh4\""),
	},
	"twilio-api-key": {
		cat("x_api_token = \"SK3f", "9a1c2e4b5d6f708192a3b4c5d6e7f8\""),
	},
	"twitch-api-token": {
		cat("twitch_api_t", "oken = \"Y6S2aeIPRMdawRfoQc16hlvrSw5VLx\""),
	},
	"twitter-access-secret": {
		cat("twitter_api_toke", "n = \"wBNjqKv2DFX6d2AE", "uQ60lifiSzfZnnasHI3Z2Wm4jBHgJ\""),
	},
	"twitter-access-token": {
		cat("twitter_api_toke", "n = \"533638849552483-vSyQpX3tvVLxVnpZ0eD3\""),
	},
	"twitter-api-key": {
		cat("twitter_api_toke", "n = \"WhH2h1VHbe5XxEpCCju5XoIWi\""),
	},
	"twitter-api-secret": {
		cat("twitter_api_toke", "n = \"3ik3kIcuIFsxNfG5", "aLffb06AhpdmzCgH", "UVU9N1XSr71mza2y6P\""),
	},
	"twitter-bearer-token": {
		cat("twitter_api_token = \"aaAAaAAAaaAAaaAaaaAaAavVAgDWlFDD", "AeifWffxySW1UZL9", "2zFcNUaRJsPz13J5", "GV5ufnsbqQh71Zyb", "5G3Y2kSXiepmXRlAIW7fX0FQ7%y4\""),
	},
	"typeform-api-token": {
		cat("tfp_api_token = \"tYPefORMM='`'TFP_eAk7LYsmo0de7bgrqGIfpr=2Wnr3IohVy9RIYWB", "bj2RfoSCPmrI9TdP0PR-}\""),
	},
	"yandex-access-token": {
		cat("yandex_api_t", "oken = \"t1.chv6=.FmGfsqVhh7u3MrBh", "7bDK5_6e4KskrSH7", "kLU4gd19n8PYZxsy", "5YYpYT6syZAH2GRc", "OLeeaU_eL_n_6BmORivXSO\""),
	},
	"yandex-api-key": {
		cat("yandex_api_t", "oken = \"AQVN14Pii35SZCij", "d4wdQsOqMzF4vRwsRL3FJIC\""),
	},
	"yandex-aws-access-token": {
		cat("yandex_api_t", "oken = \"YcDa3eq3H1M8Qqxr", "O0RpwU4pq4MSZlATKqVa1Piq\""),
	},
	"zendesk-secret-key": {
		cat("zendesk_api_toke", "n = \"y5lyKtEIKzjp54BJ", "pfKcu4adDqg7vhXBhN6CGStc\""),
	},
}

// ruleHits runs the table's rules named id alone on text, as Scan runs
// them: only when one of the rule's keywords is in the text.
func ruleHits(t *testing.T, id, text string) bool {
	t.Helper()
	found := false
	for _, h := range keywordHits(text) {
		if rules()[h.rule].id != id {
			continue
		}
		r := &rules()[h.rule]
		if _, ok := searchIn(text, h.at, r, compiled(h.rule).get(r)); ok {
			return true
		}
	}
	for i := range rules() {
		found = found || rules()[i].id == id
	}
	if !found {
		t.Fatalf("no rule %s in the table", id)
	}
	return false
}

func TestGitleaksTruePositives(t *testing.T) {
	for id, texts := range gitleaksTruePositives {
		for _, text := range texts {
			if !ruleHits(t, id, text) {
				t.Errorf("%s does not find the secret in %q", id, text)
			}
			if _, ok := Scan(text); !ok {
				t.Errorf("Scan finds nothing in %s's test string %q", id, text)
			}
		}
	}
}

func TestGitleaksFalsePositives(t *testing.T) {
	for id, texts := range gitleaksFalsePositives {
		for _, text := range texts {
			if ruleHits(t, id, text) {
				t.Errorf("%s finds a secret in %q", id, text)
			}
		}
	}
}

// gitleaks generates its other true positives as NAME_api_token = "SECRET"
// with a random SECRET of the rule's shape; these are such texts.
func TestGitleaksGeneratedShapes(t *testing.T) {
	for id, texts := range gitleaksGeneratedShapes {
		for _, text := range texts {
			if !ruleHits(t, id, text) {
				t.Errorf("%s does not find the secret in %q", id, text)
			}
		}
	}
}

// The table as the scan relies on it: keywords lower case ASCII of two
// bytes or more (keywordIndex), every regexp compiling, and every rule of
// it (not only every id: some ids have two rules) finding the secret in
// one of its test strings, so that no rule is untested.
func TestScanRuleTable(t *testing.T) {
	tests := map[string][]string{}
	for _, m := range []map[string][]string{gitleaksTruePositives, tamqTruePositives} {
		for id, texts := range m {
			tests[id] = append(tests[id], texts...)
		}
	}
	for id, texts := range gitleaksGeneratedShapes {
		tests[id] = append(tests[id], texts...)
	}
	for i := range rules() {
		r := &rules()[i]
		for _, k := range r.keywords {
			if len(k) < 2 || strings.ToLower(k) != k || strings.IndexFunc(k, func(c rune) bool { return c > '~' }) >= 0 {
				t.Errorf("%s: keyword %q is not lower case ASCII of two bytes or more", r.id, k)
			}
		}
		c := compiled(i).get(r)
		c.unanchored(r)
		tested := false
		for _, text := range tests[r.id] {
			for _, h := range keywordHits(text) {
				if h.rule == i {
					_, ok := searchIn(text, h.at, r, c)
					tested = tested || ok
				}
			}
		}
		if !tested {
			t.Errorf("rule %d (%s) finds nothing in the test strings of its id", i, r.id)
		}
	}
	t.Logf("%d rules", len(rules()))
}

// gitleaks' global allowlist and stopwords hold back every rule: what reads
// as a boolean, a repeated character, a variable, a format verb or a path
// is not a secret, nor anything holding gitleaks' example UUID or the
// alphabet.
func TestGitleaksGlobalAllowlist(t *testing.T) {
	for _, s := range []string{"true", "FALSE", "null", "xxxxxxxxxxxx", "********", "$1", "${2}", "$TOKEN", "${api_token}",
		"{{ .Values.token }}", "${{ secrets.GH_TOKEN }}", "%TOKEN%", "%s", "{0}", "@TOKEN@",
		"/Users/me/.config/token.txt", "/etc/ssl/private/server.key"} {
		if !globalAllow().MatchString(s) {
			t.Errorf("the global allowlist lets %q through", s)
		}
	}
	// gitleaks writes the first as (?i)^true|false|null$, which would let
	// any secret with "false" inside through.
	for _, s := range []string{"S3cretPassw0rd", "q8ZrfalseLmX9vB4", "nullq8Zr2LmX9vB4", "home/me/token"} {
		if globalAllow().MatchString(s) {
			t.Errorf("the global allowlist holds back %q", s)
		}
	}
	for _, tt := range []struct{ rule, text string }{
		{"heroku-api-key", `HEROKU_KEY = "014df517-39d1-4453-b7b3-9930c563627c"`},
		{"password-option", cat("tool --api-key=", "abcdefghijklmnopqrstuvwxyz0123")},
	} {
		if ruleHits(t, tt.rule, tt.text) {
			t.Errorf("%s finds a secret in %q", tt.rule, tt.text)
		}
		if !ruleHits(t, tt.rule, strings.Replace(strings.Replace(tt.text, "014df517", "914df517", 1), "abc", "abd", 1)) {
			t.Errorf("%s finds nothing in %q without its stopword", tt.rule, tt.text)
		}
	}
}
