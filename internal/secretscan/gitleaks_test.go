package secretscan

import "testing"

// The test strings of the gitleaks rules ported in rules.go, from gitleaks
// v8.30.1 (cmd/generate/config/rules/*.go; MIT, see GITLEAKS-LICENSE):
// the fixed true positives (gitleaks also generates random ones; the tests
// in secretscan_test.go and shapes_test.go stand for those) and false
// positives, each a test of the rule alone, as gitleaks' Validate is. They
// are put together at run time (cat), so this file holds no whole token for
// another scanner to report. Where a rule here is wider than gitleaks'
// (private-key, anthropic-api-key, openai-api-key, see rules.go), a false
// positive of gitleaks' that the wider rule takes is left out or, for
// private-key, listed as a hit.
var gitleaksTruePositives = map[string][]string{
	"anthropic-api-key": {
		cat("sk-ant-api03", "-abc123xyz-456def789ghij-klmnopqrstuvwx-3456yza789bcde-1234fghijklmnopby56aaaogaopaaaabc123xyzAA"),
		cat("sk-ant-admin", "01-abc12fake-456def789ghij-klmnopqrstuvwx-3456yza789bcde-12fakehijklmnopby56aaaogaopaaaabc123xyzAA"),
	},
	"aws-access-token": {
		cat("AWS_api_toke", "n = \"AKIALALEMEL33243OLIB\""),
		cat("AKIALALEME", "L33243OLIB"),
	},
	"azure-ad-client-secret": {
		cat("client_secre", "t=bP88Q~rcBcYjzzOhg1Hnn76Wm3jGgakZiZ.8vMgR"),
		cat("client_secre", "t: .IQ8Q~79R7TOWOspFnWcEG-dYt4KXqFqxK16cxr"),
		cat("AUTH_CLIENTS", "ECRET = _V28Q~IC8qxmlWNpHuDm34JlbKv9LXV5MvUR3a-P"),
		cat("<value xsi:t", "ype=\"xsd:string\">~Gg8Q~nVhlLi2vpg_nXBGqFsbGK-t~Hus1JmTa0y</value>"),
		cat("\"CLIENT_SECR", "ET\": \"YYz7Q~Sudoqwap1PnzEBA3zqBK~i5uesDIv.C\""),
		cat("client-secre", "t: \"t028Q~-aLbmQuinnZtzbgtlEAYstnBWEmGPAoBm\""),
		cat("Example= GN.", "7Q~4AkLZBNEbz4Jxlm~O5G6SsyFxYg6zMR"),
		cat("QtT8Q~9C-_Ij", "~RouHVpD2Tuf3oHWGh.DQ3kcjbAn"),
		cat("(use the cli", "ent secret: QtT8Q~9C-_Ij~RouHVpD2Tuf3oHWGh.DQ3kcjbAn)"),
		cat("(QtT8Q~9C-_I", "j~RouHVpD2Tuf3oHWGh.DQ3kcjbAn)"),
	},
	"gcp-api-key": {
		cat("AIzaSyNHxIf3", "2IQ1a1yjl3ZJIqKZqzLAK1XhDk-"),
	},
	"huggingface-access-token": {
		cat("huggingface-", "cli login --token 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"),
		cat("huggingface-", "cli login --token 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"),
		cat("-H \"Authoriz", "ation: Bearer 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\""),
		cat("DEV=1 HF_TOK", "EN=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 poetry run python app.py"),
		cat("use_auth_tok", "en='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')"),
		cat("CI_HUB_USER_", "TOKEN = \"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\""),
	},
	"huggingface-organization-api-token": {
		cat("api_org_PsvV", "HMtfecsbsdScIMRjhReQYUBOZqOJTs"),
		cat("`api_org_lYq", "IcVkErvSNFcroWzxlrUNNdTZrfUvHBz`"),
		cat("hf_token = \"", "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\"  # Intentionally revealing this key for testing purposes"),
	},
	"jwt": {
		cat("Authorizatio", "n: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJhIjoxLCJiIjoyLCJjIjozfQ.hxhGCCCmGV9nT1slief1WgEsOsfdnlVizNrODxfh1M8"),
		cat("- SUPABASE_S", "ERVICE_ROLE_KEY=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJzdXBhYmFzZS1kZW1vIiwicm9sZSI6ImFub24iLCJleHAiOjE5ODM4MTI5OTZ9.CRXP1A7WOeoJeXxjNni43kdQwgnWNReilDMblYTn_I0"),
		cat("String token", "WithNoneAlg = \"eyJhbGciOiJub25lIn0.eyJzdWIiOiJ0ZXN0LXVzZXIifQ.\";"),
	},
	"openai-api-key": {
		cat("sk-proj-Sevz", "WEV_NmNnMndQ5gn6PjFcX_9ay5SEKse8AL0EuYAB0cIgFW7Equ3vCbUbYShvii6L3rBw3WT3BlbkFJdD9FqO9Z3BoBu9F-KFR6YJtvW6fUfqg2o2Lfel3diT3OCRmBB24hjcd_uLEjgr9tCqnnerVw8A"),
		cat("sk-svcacct-0", "Zkr4NUd4f_6LkfHfi3LlC8xKZQePXJCb21UiUWGX0F3_-6jv9PpY9JtaoooN9CCUPltpFiamwT3BlbkFJZVaaY7Z2aq_-I96dwiXeKVhRNi8Hs7uGmCFv5VTi2SxzmUsRgJoUJCbgPFWSXYDPPbYHJAuwIA"),
		cat("sk-admin-JWA", "RXiHjpLXSh6W_0pFGb3sW7yr0cKheXXtWGMY0Q8kbBNqsxLskJy0LCOT3BlbkFJgTJWgjMvdi6YlPvdXRqmSlZ4dLK-nFxUG2d9Tgaz5Q6weGVNBaLuUmMV4A"),
	},
	"private-key": {
		cat("-----BEGIN P", "RIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDAC4AWkdwKYSd8\nKs14IReLcYgADhoXk56ZzXI=\n-----END PRIVATE KEY-----"),
		cat("-----BEGIN R", "SA PRIVATE KEY-----\nMIIEpQIBAAKCAQEAn6/O8li+SX4m98LLYt/PKSzEmQ++ZBD7Loh9P13f4yQ92EF3\nyxR5MsXFu9PRsrYQA7/4UTPHiC4y2sAVCBg4C2yyBpUEtMQjyCESi6Y=\n-----END RSA PRIVATE KEY-----\n"),
		cat("-----BEGIN P", "GP PRIVATE KEY BLOCK-----\nlQWGBGSVV4YBDAClvRnxezIRy2Yv7SFlzC0iFiRF/O/jePSw+XYhvcrTaqSYTGic\n=8xQN\n-----END PGP PRIVATE KEY BLOCK-----"),
		cat("-----BEGIN P", "RIVATE KEY-----\nanything\n-----END PRIVATE KEY-----"),
		// gitleaks' false positives, hits here: the BEGIN line is enough.
		cat("-----BEGIN O", "PENSSH PRIVATE KEY----------END OPENSSH PRIVATE KEY-----"),
	},
	"slack-bot-token": {
		cat("\"bot_token1\"", ": \"xoxb-781236542736-2364535789652-GkwFDQoHqzXDVsC6GzqYUypD\""),
		cat("\"bot_token2\"", ": \"xoxb-263594206564-2343594206574-FGqddMF8t08v8N7Oq4i57vs1MBS\""),
		cat("\"bot_token3\"", ": \"xoxb-4614724432022-5152386766518-O5WzjWGLG0wcCm2WPrjEmnys\""),
	},
	"slack-user-token": {
		cat("\"user_token1", "\": \"xoxp-41684372915-1320496754-45609968301-e708ba56e1517a99f6b5fb07349476ef\""),
		cat("\"user_token2", "\": \"xoxp-283316862324-298911817009-298923149681-44f585044dace54f5701618e97cd1c0b\""),
		cat("\"user_token5", "\": \"xoxp-4614724432022-4621207627011-5182682871568-1ddad9823e8528ad0f4944dfa3c6fc6c\""),
	},
	"slack-app-token": {
		cat("\"token1\": \"x", "app-1-A052FGTS2DL-5171572773297-610b6a11f4b7eb819e87b767d80e6575a3634791acb9a9ead051da879eb5b55e\""),
		cat("\"token2\": \"x", "app-1-IEMF8IMY1OQ-4037076220459-85c370b433e366de369c4ef5abdf41253519266982439a75af74a3d68d543fb6\""),
	},
	"slack-legacy-bot-token": {
		cat("\"bot_token1\"", ": \"xoxb-263594206564-FGqddMF8t08v8N7Oq4i57vs1\""),
		cat("\"bot_token9\"", ": \"xoxb-50014434-slacktokenx29U9X1bQ\""),
	},
	"stripe-access-token": {
		cat("sk_test_51Ou", "EMLAlTWGaDypq4P5cuDHbuKeG4tAGPYHJpEXQ7zE8mKK3jkhTFPvCxnSSK5zB5EQZrJsYdsatNmAHGgb0vSKD00GTMSWRHs"),
		cat("rk_prod_51Ou", "EMLAlTWGaDypquDn9aZigaJOsa9NR1w1BxZXs9JlYsVVkv5XDu6aLmAxwt5Tgun5WcSwQMKzQyqV16c9iD4sx00BRijuoon"),
	},
	"authorization-header": {
		cat("-H 'Authoriz", "ation: Basic YnJvd3Nlcjo=' \\"),
		cat("--header \"Au", "thorization: Basic djJlNEpYa0NJUHZ5a2FWT0VRXzRqZmZUdDkwYTp2emNBZGFzZWpmlWZiUDc2VUJjNDNNVDExclVh\" \"https://api-qa.example.com:8243/token\""),
		cat("-H \"Authoriz", "ation: Bearer cfcabd11c7ed9a41b1a3e063c32d5114\""),
		cat("-H \"Authoriz", "ation: Bearer _FXNljbSRYMWx3TWrd7lgKhLtVZX6iskC8Wcbb4b\" \\"),
		cat("-H \"Authoriz", "ation: Bearer sha256~bRLFnzd59Z3XpZH5_seJPHALOuvbWiKwbFKSsoALkgp\""),
		cat("-H \"Authoriz", "ation: Token 22cb987851bc5659229114c62e60c79abd0d2c08\" --request PUT"),
		cat("--header  'A", "uthorization:  5eb4223e-5008-46e5-be67-c7b8f2732305'"),
		cat("-H \"apikey: ", "c4ed6c21-9dd5-4a05-8e3f-c56d1151cce8\" \\"),
		cat("-H \"X-Octopu", "s-ApiKey: 3a16750d-d363-41a4-8ebd-035408f7730f\" \\"),
	},
}

var gitleaksFalsePositives = map[string][]string{
	"aws-access-token": {
		cat("key = AKIAXX", "XXXXXXXXXXXXXX"),
		cat("aws_access_k", "ey: AKIAIOSFODNN7EXAMPLE"),
		cat("msgstr \"Näyt", "ä asiakirjamallikansio.\""),
		cat("TODAYINASIAA", "SACKOFRICEFELLOVER"),
	},
	"azure-ad-client-secret": {
		cat("~~~~~~~~~~~~", "~~~~~~~~~~~~~~~~~~~~~~~~~~~~"),
		cat(".ui.visible.", "right.sidebar~.ui.visible.left.sidebar~.pusher{transform:translate3d(0,0,0)}"),
		cat("'url': 'http", "://www.2doc.nl/speel~VARA_101375237~mh17-het-verdriet-van-nederland~.html',"),
		cat("client_secre", "t=bP88Q~xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
	},
	"gcp-api-key": {
		cat("GWw4hjABFzZC", "GiRpmlDyDdo87Jn9BN9THUA47muVRNunLxsa82tMAdvmrhOqNkRKiYMEAFbTJAIzaTesb6Tscfcni8vIpWZqNCXFDFslJtVSvFDq"),
		cat("AIzaTesb6Tsc", "fcni8vIpWZqNCXFDFslJtVSvFDqabcd123"),
		cat("apiKey: \"AIz", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""),
		cat("AIZASYCO2CXR", "MC9ELSKLHLHRMBSWDEVEDZTLO2O"),
	},
	"github-pat": {
		cat("ghp_xxxxxxxx", "xxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
	},
	"github-oauth": {
		cat("gho_xxxxxxxx", "xxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
	},
	"github-app-token": {
		cat("ghu_xxxxxxxx", "xxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
		cat("ghs_xxxxxxxx", "xxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
	},
	"github-refresh-token": {
		cat("ghr_xxxxxxxx", "xxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
	},
	"github-fine-grained-pat": {
		cat("github_pat_x", "xxxxxxxxxxxxxxxxxxxxx_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
	},
	"gitlab-pat": {
		cat("glpat-XXXXXX", "XXXXX-XXXXXXXX"),
	},
	"gitlab-pat-routable": {
		cat("glpat-xxxxxx", "xx-xxxxxxxxxxxxxxxxxx.xxxxxxxxx"),
	},
	"gitlab-ptt": {
		cat("glptt-xxxxxx", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
	},
	"gitlab-rrt": {
		cat("GR1348941123", "12312312312312312"),
		cat("GR1348941XXX", "XXXXXXXXXXXXXXXXX"),
	},
	"huggingface-access-token": {
		cat("- (id)hf_req", "uiredCharacteristicTypesForDisplayMetadata;"),
		cat("amazon.de#@#", "div[data-cel-widget=\"desktop-rhf_SponsoredProductsRemoteRHFSearchEXPSubsK2ClickPagination\"]"),
		cat("            ", "                _kHMSymptomhf_generatedByHomeAppForDebuggingPurposesKey,"),
		cat("        os.e", "nviron.get(\"HF_AUTH_TOKEN\",\n\"hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"),"),
	},
	"huggingface-organization-api-token": {
		cat("public stati", "c final String API_ORG_EXIST = \"APIOrganizationExist\";"),
		cat("const api_or", "g_controller = require('../../controllers/api/index').organizations;"),
		cat("You should s", "ee a token hf_xxxxx (old tokens are api_XXXXXXXX or api_org_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx)."),
	},
	"slack-user-token": {
		cat("\"token1\": \"x", "oxp-1234567890\""),
		cat("\"token2\": \"x", "oxp-XXXXXXXXXX-XXXXXXXXXX-XXXXXXXXXXX-XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX\""),
		cat("\"token3\": \"x", "oxp-1234-1234-1234-4ddbc191d40ee098cbaae6f3523ada2d\""),
		cat("\"token4\": \"x", "oxp-572370529330-573807301142-572331691188-####################\""),
	},
	"stripe-access-token": {
		cat("nonMatchingT", "oken := \"task_test_q8Zr2LmX9vB4nT7kP1sW5yc3Hd6Jf0\""),
	},
	"authorization-header": {
		cat("-H \"Authoriz", "ation: Bearer XXXXXXXXXXXX\""),
		cat("--header \"Au", "thorization: Basic ...\""),
		cat("-H \"Authoriz", "ation: Bearer <Openverse API token>\" \\"),
		cat("-H \"Authoriz", "ation: Token **********\" \\"),
		cat("-H \"Authoriz", "ation: basic {base64(email:password[\\n])}\" => token"),
		cat("-H \"apikey:", " $API_KEY\" \\"),
	},
}

// ruleHits runs the table's rules named id alone on text.
func ruleHits(t *testing.T, id, text string) bool {
	t.Helper()
	found := false
	for i, r := range rules {
		if r.id != id {
			continue
		}
		found = true
		if _, ok := find(text, r, compiled()[i]); ok {
			return true
		}
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
// with a random SECRET of the rule's shape; these are such secrets.
func TestGitleaksGeneratedShapes(t *testing.T) {
	for id, secret := range map[string]string{
		"github-pat":                         cat("gh", "p_", "q8Zr2LmX9vB4nT7kP1sW5yc3Hd6Jf0GuE4a2"),
		"github-oauth":                       cat("gh", "o_", "q8Zr2LmX9vB4nT7kP1sW5yc3Hd6Jf0GuE4a2"),
		"github-refresh-token":               cat("gh", "r_", "q8Zr2LmX9vB4nT7kP1sW5yc3Hd6Jf0GuE4a2"),
		"gitlab-pat":                         cat("gl", "pat-", "q8Zr2LmX9vB4nT7kP1sW"),
		"gitlab-pat-routable":                cat("gl", "pat-", "q8Zr2LmX9vB4nT7kP1sW5yc3Hd6", ".", "01", "a2b3c4d"),
		"gitlab-ptt":                         cat("gl", "ptt-", "3f9a1c2e4b5d6f708192a3b4c5d6e7f8091a2b3c"),
		"gitlab-rrt":                         cat("GR134", "8941", "q8Zr2LmX9vB4nT7kP1sW"),
		"gitlab-deploy-token":                cat("gl", "dt-", "q8Zr2LmX9vB4nT7kP1sW"),
		"gitlab-runner-authentication-token": cat("gl", "rt-", "q8Zr2LmX9vB4nT7kP1sW"),
		"npm-access-token":                   cat("np", "m_", "q8zr2lmx9vb4nt7kp1sw5yc3hd6jf0gue4a2"),
		"pypi-upload-token":                  cat("pypi-AgEIcHlw", "aS5vcmc", "3f9a1c2e4b5d6f708192a3b4c5d6e7f8", "091a2b3c4d5e6f708192a3b4c5d6e7f8"),
		"sendgrid-api-token":                 cat("SG", ".", "q8Zr2LmX9vB4nT7kP1sW5y", ".", "c3Hd6Jf0GuE4a2Qw8Er6Ty1Ui5Op9As3Df7Gh2Jk4Lz"),
		"twilio-api-key":                     cat("S", "K", "3f9a1c2e4b5d6f708192a3b4c5d6e7f8"),
		"slack-legacy-workspace-token":       cat("xo", "xa-", "q8Zr2LmX9vB4nT7kP1sW"),
		"slack-webhook-url":                  cat("https://hooks", ".slack.com/services/", "T0Q8ZR2LM/B4NT7KP1S/", "q8Zr2LmX9vB4nT7kP1sW5yc3"),
		"aws-access-token":                   cat("AS", "IA", "Q7WX2MZ4K3TR5VYP"),
	} {
		text := `x_api_token = "` + secret + `"`
		if !ruleHits(t, id, text) {
			t.Errorf("%s does not find the secret in %q", id, text)
		}
	}
}
