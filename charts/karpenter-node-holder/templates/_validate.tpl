{{- /*
Every setting is checked at `helm install` time the way the CLI checks it (reconcile/rule/settings.py).
A duration's syntax is the CLI's own pattern in values.schema.json (Helm's words name the value);
its bounds, and the text of every other setting, are refused here with the CLI's own one-line
message: `holdDuration (HOLD_DURATION): '8d' is longer than 7d; use a duration from 1s to 7d,
such as ...`. The grammar's data (kinds, bounds, choices, each setting's fix) is generated
from the CLI into _grammar.tpl; the parsing is written out below.
tests/install/test_chart_schema.py feeds the same text to the CLI's parsers and to
`helm template` and requires the same verdict, and the same words where a template refuses.

Then the rules across values, which the CLI cannot see: --max-hold not shorter than the hold
(the CLI's check_max_hold), the budget mechanism's whole NodePools (check_mechanism), timeout < activeDeadlineSeconds < the schedule's interval, and the
uninstall hook's deadline within Helm's default timeout.
*/ -}}

{{- define "node-holder.validate" -}}
{{- $grammar := include "node-holder.grammar" . | fromJson }}
{{- $seconds := dict }}
{{- range $name, $rule := $grammar.values }}
{{- $text := include "node-holder.text" (index $.Values $name) }}
{{- $label := printf "%s (%s)" $name $rule.env }}
{{- $_ := set $seconds $name (include "node-holder.check" (dict "rule" $rule "text" $text "label" $label)) }}
{{- end }}
{{- range $env, $value := .Values.settings }}
{{- $rule := index $grammar.settings $env }}
{{- $label := printf "settings.%s" $env }}
{{- $_ := set $seconds $env (include "node-holder.check" (dict "rule" $rule "text" (include "node-holder.text" $value) "label" $label)) }}
{{- end }}
{{- $hold := $seconds.holdDuration | float64 }}
{{- if and $seconds.holdMaxDuration (lt ($seconds.holdMaxDuration | float64) $hold) }}
{{- fail (printf "holdMaxDuration (HOLD_MAX_DURATION): %s is shorter than the hold duration (%s); use a value of at least the hold duration, or leave it unset" (include "node-holder.duration" $seconds.holdMaxDuration) (include "node-holder.duration" $hold)) }}
{{- end }}
{{- $mechanism := include "node-holder.text" .Values.mechanism | trim | lower }}
{{- $scope := include "node-holder.text" .Values.holdScope | trim | lower }}
{{- $finer := "" }}
{{- if eq $scope "node" }}{{ $finer = "holdScope (HOLD_SCOPE) node" }}
{{- else if and (eq $scope "group") (ne (include "node-holder.text" .Values.holdGroupLabel | trim) "karpenter.sh/nodepool") }}{{ $finer = printf "holdGroupLabel (HOLD_GROUP_LABEL) %s" (include "node-holder.text" .Values.holdGroupLabel | trim) }}
{{- else if trim (include "node-holder.text" .Values.holdNodeSelector) }}{{ $finer = printf "holdNodeSelector (HOLD_NODE_SELECTOR) %s" (include "node-holder.repr" .Values.holdNodeSelector) }}
{{- end }}
{{- if and (ne $mechanism "annotation") $finer }}
{{- fail (printf "mechanism (NODE_HOLDER_MECHANISM) %s: %s holds less than a whole NodePool, which a budget cannot; use holdScope cluster, or group with holdGroupLabel karpenter.sh/nodepool, and no holdNodeSelector; or mechanism annotation" $mechanism $finer) }}
{{- end }}
{{- $deadline := .Values.activeDeadlineSeconds | int }}
{{- $timeout := $seconds.timeout | float64 }}
{{- if ge $timeout ($deadline | float64) }}
{{- fail (printf "timeout (NODE_HOLDER_TIMEOUT): %s is not shorter than activeDeadlineSeconds (%ds), after which the Job controller kills the run; use a shorter timeout, or raise activeDeadlineSeconds" (include "node-holder.duration" $timeout) $deadline) }}
{{- end }}
{{- $interval := include "node-holder.intervalSeconds" .Values.schedule | int }}
{{- if ge $deadline $interval }}
{{- fail (printf "activeDeadlineSeconds: %d is not shorter than the schedule's interval (%s: schedule %s), so a slow run would make the next one skip; use fewer seconds, or a longer interval" $deadline (include "node-holder.duration" $interval) (include "node-holder.repr" .Values.schedule)) }}
{{- end }}
{{- if .Values.uninstall.releaseHolds }}
{{- $hook := .Values.uninstall.activeDeadlineSeconds | int }}
{{- /* The hook waits out a run in flight (its deadline, 5s grace, 10s for the Job controller), then releases (timeout). */ -}}
{{- $needs := add $deadline 15 (ceil $timeout) | int }}
{{- if gt $needs 299 }}
{{- fail (printf "uninstall.activeDeadlineSeconds: the hook would need more than helm uninstall waits for it (5m, its default --timeout): it waits out a run in flight (activeDeadlineSeconds %d + 15s), then releases (timeout %s); shorten those, or set uninstall.releaseHolds=false and run node-holder release yourself before helm uninstall" $deadline (include "node-holder.duration" $timeout)) }}
{{- else if or (le $hook $needs) (gt $hook 300) }}
{{- fail (printf "uninstall.activeDeadlineSeconds: %d is outside %d to 300: the hook waits out a run in flight (activeDeadlineSeconds %d + 15s), then releases (timeout %s), and helm uninstall waits for it at most 5m (its default --timeout); use a value from %d to 300" $hook (add $needs 1) $deadline (include "node-holder.duration" $timeout) (add $needs 1)) }}
{{- end }}
{{- end }}
{{- end }}

{{- /* One value's text against its rule: fails with the CLI's message, or gives seconds (durations). */ -}}
{{- define "node-holder.check" -}}
{{- $kind := .rule.kind }}
{{- if eq $kind "duration" }}{{ include "node-holder.checkDuration" . }}
{{- else if eq $kind "keys" }}{{ include "node-holder.checkKeys" . }}
{{- else if eq $kind "selector" }}{{ include "node-holder.checkSelector" . }}
{{- else if eq $kind "label" }}
{{- $problem := include "node-holder.keyProblem" (trim .text) }}
{{- if $problem }}{{ include "node-holder.refuse" (merge (dict "problem" (printf "is not a valid label key (%s)" $problem)) .) }}{{ end }}
{{- else if eq $kind "choice" }}
{{- if not (has (lower (trim .text)) .rule.choices) }}{{ include "node-holder.refuse" (merge (dict "problem" (printf "is not one of %s" (join ", " .rule.choices))) .) }}{{ end }}
{{- else if eq $kind "boolean" }}
{{- if not (has (lower (trim .text)) (list "true" "yes" "on" "1" "false" "no" "off" "0")) }}{{ include "node-holder.refuse" (merge (dict "problem" "is not a boolean") .) }}{{ end }}
{{- else if eq $kind "integer" }}
{{- $raw := trim .text }}
{{- if not (regexMatch "^[+]?[0-9]+$" $raw) }}{{ include "node-holder.refuse" (merge (dict "problem" "is not a whole number") .) }}{{ end }}
{{- $digits := regexReplaceAll "^[+]?0*" $raw "" }}
{{- if or (gt (len $digits) 18) (lt (atoi $digits) (.rule.low | int)) (gt (atoi $digits) (.rule.high | int)) }}{{ include "node-holder.refuse" (merge (dict "problem" "is out of range") .) }}{{ end }}
{{- else if eq $kind "number" }}
{{- $raw := trim .text }}
{{- if not (regexMatch "^[+]?(?:[0-9]+(?:\\.[0-9]*)?|\\.[0-9]+)$" $raw) }}{{ include "node-holder.refuse" (merge (dict "problem" "is not a number") .) }}{{ end }}
{{- $whole := regexReplaceAll "^[+]?0*([0-9]*).*$" $raw "${1}" }}
{{- $value := regexReplaceAll "^[+]" $raw "" | float64 }}
{{- if or (gt (len $whole) 20) (lt $value (.rule.low | float64)) (gt $value (.rule.high | float64)) }}{{ include "node-holder.refuse" (merge (dict "problem" "is out of range") .) }}{{ end }}
{{- end }}
{{- end }}

{{- define "node-holder.refuse" -}}
{{- fail (printf "%s: %s %s; %s" .label (include "node-holder.repr" .text) .problem .rule.fix) }}
{{- end }}

{{- /* Python's repr() of a text, as the CLI's messages quote it. */ -}}
{{- define "node-holder.repr" -}}
{{- $s := . | toString | replace "\\" "\\\\" | replace "\n" "\\n" | replace "\r" "\\r" | replace "\t" "\\t" }}
{{- if and (contains "'" $s) (not (contains "\"" $s)) }}"{{ $s }}"
{{- else }}'{{ $s | replace "'" "\\'" }}'
{{- end }}
{{- end }}

{{- /* settings.parse_duration's bounds: seconds, or the CLI's refusal. The schema has judged
the text with the CLI's pattern; a YAML number (the hold duration's bare minutes) is checked
against it here. */ -}}
{{- define "node-holder.checkDuration" -}}
{{- $rule := .rule }}
{{- $raw := trim .text }}
{{- if $raw }}
{{- if not (regexMatch $rule.pattern $raw) }}{{ include "node-holder.refuse" (merge (dict "problem" "is not a duration") .) }}{{ end }}
{{- $secs := 0.0 }}
{{- $huge := false }}
{{- range regexFindAll "[0-9.]+(ms|[dhms])?" (lower $raw) -1 }}
{{- $n := regexFind "^[0-9.]+" . }}
{{- $huge = or $huge (gt (len (regexReplaceAll "^0*([0-9]*).*$" $n "${1}")) 20) }}
{{- $secs = addf $secs (mulf ($n | float64) (index (dict "d" 86400 "h" 3600 "m" 60 "s" 1 "ms" 0.001) (trimPrefix $n . | default "m"))) }}
{{- end }}
{{- $problem := "" }}
{{- if and (not $huge) (le $secs 0.0) }}{{ $problem = "is not a positive duration" }}
{{- else if or $huge (gt $secs ($rule.high | float64)) }}{{ $problem = printf "is longer than %s" $rule.highText }}
{{- else if lt $secs ($rule.low | float64) }}{{ $problem = printf "is shorter than %s" $rule.lowText }}
{{- end }}
{{- if $problem }}{{ include "node-holder.refuse" (merge (dict "problem" $problem) .) }}{{ end }}
{{- $secs }}
{{- end }}
{{- end }}

{{- /* settings.format_duration: 1h30m, 20m, 45s, 2d3h (the first two parts), 500ms. */ -}}
{{- define "node-holder.duration" -}}
{{- $secs := . | float64 }}
{{- if and (gt $secs 0.0) (lt $secs 1.0) }}{{ mulf $secs 1000 | round 0 | int }}ms
{{- else }}
{{- $left := round $secs 0 | int }}
{{- $parts := list }}
{{- range list (list "d" 86400) (list "h" 3600) (list "m" 60) (list "s" 1) }}
{{- $amount := div $left (index . 1) }}
{{- $left = mod $left (index . 1) }}
{{- if $amount }}{{ $parts = append $parts (printf "%d%s" $amount (index . 0)) }}{{ end }}
{{- end }}
{{- if $parts }}{{ slice $parts 0 (min 2 (len $parts)) | join "" }}{{ else }}0s{{ end }}
{{- end }}
{{- end }}

{{- /* settings.parse_annotation_keys: the keys, comma-joined, or the CLI's refusal. */ -}}
{{- define "node-holder.checkKeys" -}}
{{- $keys := list }}
{{- range splitList "," .text }}
{{- $key := trim . }}
{{- if not $key }}
{{- if or . (contains "," $.text) }}{{ include "node-holder.refuse" (merge (dict "problem" "has an empty item") $) }}{{ end }}
{{- else }}
{{- if regexMatch "[\\s\\v\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]" $key }}
{{- include "node-holder.refuse" (merge (dict "problem" (printf "has a space inside the key %s" (include "node-holder.repr" $key))) $) }}
{{- end }}
{{- $problem := include "node-holder.keyProblem" $key }}
{{- if $problem }}{{ include "node-holder.refuse" (merge (dict "problem" (printf "is not a valid annotation key (%s)" $problem)) $) }}{{ end }}
{{- if hasPrefix "node-holder.dev/" $key }}
{{- include "node-holder.refuse" (merge (dict "problem" (printf "names %s, one of this tool's own annotations" (include "node-holder.repr" $key))) $) }}
{{- end }}
{{- $keys = append $keys $key | uniq }}
{{- end }}
{{- end }}
{{- if not $keys }}{{ include "node-holder.refuse" (merge (dict "problem" "names no annotation key") .) }}{{ end }}
{{- end }}

{{- /* names.qualified_name_problem: why a text is not an annotation or label key ("": it is one). */ -}}
{{- define "node-holder.keyProblem" -}}
{{- $parts := splitList "/" . }}
{{- $name := last $parts }}
{{- $prefix := initial $parts | join "/" }}
{{- $alnum := "^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$" }}
{{- if not . }}must not be empty
{{- else if and (gt (len $parts) 1) (not $prefix) }}prefix part must not be empty
{{- else if gt (len $prefix) 253 }}prefix part must be no more than 253 characters
{{- else if and (gt (len $parts) 1) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $prefix)) }}prefix part must be a lowercase DNS subdomain (for example 'karpenter.sh' or 'example.com')
{{- else if not $name }}name part must not be empty
{{- else if gt (len $name) 63 }}name part must be no more than 63 characters
{{- else if not (regexMatch $alnum $name) }}name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character
{{- end }}
{{- end }}

{{- /* selectors.parse_selector (Kubernetes label selector grammar), refused as the CLI does. */ -}}
{{- define "node-holder.checkSelector" -}}
{{- $error := "" }}
{{- if trim .text }}
{{- $parts := list }}
{{- $current := "" }}
{{- $depth := 0 }}
{{- range splitList "" .text }}
{{- if eq . "(" }}{{ $depth = add1 $depth }}{{ end }}
{{- if eq . ")" }}{{ $depth = sub $depth 1 }}{{ if and (lt $depth 0) (not $error) }}{{ $error = "unbalanced ')'" }}{{ end }}{{ end }}
{{- if and (eq . ",") (eq $depth 0) }}{{ $parts = append $parts $current }}{{ $current = "" }}
{{- else }}{{ $current = printf "%s%s" $current . }}{{ end }}
{{- end }}
{{- if and (not $error) (gt $depth 0) }}{{ $error = "unbalanced '('" }}{{ end }}
{{- $parts = append $parts $current }}
{{- range $parts }}
{{- if not $error }}
{{- if not (trim .) }}{{ $error = printf "empty requirement in %s" (include "node-holder.repr" $.text) }}
{{- else }}{{ $error = include "node-holder.requirementProblem" . }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if $error }}{{ include "node-holder.refuse" (merge (dict "problem" (printf "is not a label selector (%s)" $error)) .) }}{{ end }}
{{- end }}

{{- define "node-holder.requirementProblem" -}}
{{- $key := "[^\\s!=<>,()]+" }}
{{- $set := printf "^\\s*(!?)\\s*(%s)\\s+(in|notin)\\s*\\(([^()]*)\\)\\s*$" $key }}
{{- $op := printf "^\\s*(%s)\\s*(==|=|!=|>|<)\\s*([^\\s!=<>,()]*)\\s*$" $key }}
{{- $exists := printf "^\\s*(!?)\\s*(%s)\\s*$" $key }}
{{- if regexMatch $set . }}
{{- $k := regexReplaceAll $set . "${2}" }}
{{- $verb := regexReplaceAll $set . "${3}" }}
{{- $values := list }}
{{- range splitList "," (regexReplaceAll $set . "${4}") }}{{ $values = append $values (trim .) }}{{ end }}
{{- if regexReplaceAll $set . "${1}" }}'!' cannot be combined with {{ include "node-holder.repr" $verb }} in {{ include "node-holder.repr" (trim .) }}
{{- else if include "node-holder.keyProblem" $k }}invalid label key {{ include "node-holder.repr" $k }}: {{ include "node-holder.keyProblem" $k }}
{{- else if eq (join "," $values) "" }}{{ $k }} {{ $verb }} (...) needs at least one value
{{- else }}{{ include "node-holder.valueProblems" $values }}
{{- end }}
{{- else if regexMatch $op . }}
{{- $k := regexReplaceAll $op . "${1}" }}
{{- $verb := regexReplaceAll $op . "${2}" }}
{{- $v := regexReplaceAll $op . "${3}" }}
{{- if include "node-holder.keyProblem" $k }}invalid label key {{ include "node-holder.repr" $k }}: {{ include "node-holder.keyProblem" $k }}
{{- else if has $verb (list ">" "<") }}
{{- if not (regexMatch "^-?[0-9]+$" $v) }}{{ $k }}{{ $verb }}{{ $v }}: '{{ $verb }}' needs an integer value{{ end }}
{{- else }}{{ include "node-holder.valueProblems" (list $v) }}
{{- end }}
{{- else if regexMatch $exists . }}
{{- $k := regexReplaceAll $exists . "${2}" }}
{{- if include "node-holder.keyProblem" $k }}invalid label key {{ include "node-holder.repr" $k }}: {{ include "node-holder.keyProblem" $k }}{{ end }}
{{- else }}cannot parse requirement {{ include "node-holder.repr" (trim .) }}
{{- end }}
{{- end }}

{{- /* names.label_value_problem for each value: the first problem, or "". */ -}}
{{- define "node-holder.valueProblems" -}}
{{- $found := "" }}
{{- range . }}
{{- if and (not $found) . }}
{{- if gt (len .) 63 }}{{ $found = printf "invalid label value %s: must be no more than 63 characters" (include "node-holder.repr" .) }}
{{- else if not (regexMatch "^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$" .) }}{{ $found = printf "invalid label value %s: must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character" (include "node-holder.repr" .) }}
{{- end }}
{{- end }}
{{- end }}
{{- $found }}
{{- end }}

{{- /*
The shortest time between two runs of a CronJob schedule, in seconds: from its minute and hour
fields (days and months only make gaps longer), or its @hourly/@daily/... or @every form.
*/ -}}
{{- define "node-holder.intervalSeconds" -}}
{{- $s := trim . }}
{{- $macros := dict "@yearly" 31536000 "@annually" 31536000 "@monthly" 2419200 "@weekly" 604800 "@daily" 86400 "@midnight" 86400 "@hourly" 3600 }}
{{- if hasKey $macros $s }}{{ index $macros $s }}
{{- else if regexMatch "^@every ([0-9]+h)?([0-9]+m)?([0-9]+s)?$" $s }}
{{- $total := 0 }}
{{- range regexFindAll "[0-9]+[hms]" $s -1 }}{{ $total = add $total (mul (trimAll "hms" . | atoi) (index (dict "h" 3600 "m" 60 "s" 1) (regexFind "[hms]$" .))) }}{{ end }}
{{- $total }}
{{- else }}
{{- $fields := regexSplit "\\s+" $s -1 }}
{{- if ne (len $fields) 5 }}
{{- fail (printf "schedule: %s is not a cron schedule of five fields (minute hour day-of-month month day-of-week); use e.g. '* * * * *'" (include "node-holder.repr" $s)) }}
{{- end }}
{{- $minutes := include "node-holder.cronField" (dict "field" (index $fields 0) "high" 59 "schedule" $s) | fromJsonArray }}
{{- $hours := include "node-holder.cronField" (dict "field" (index $fields 1) "high" 23 "schedule" $s) | fromJsonArray }}
{{- $runs := list }}
{{- range $h := $hours }}{{ range $m := $minutes }}{{ $runs = append $runs (add (mul $h 60) $m) }}{{ end }}{{ end }}
{{- $gap := add (sub (first $runs) (last $runs)) 1440 }}
{{- $previous := -1 }}
{{- range $runs }}{{ if ge $previous 0 }}{{ $gap = min $gap (sub . $previous) }}{{ end }}{{ $previous = . }}{{ end }}
{{- mul $gap 60 }}
{{- end }}
{{- end }}

{{- /* One cron field's values from 0 to .high, ascending, as a JSON list. */ -}}
{{- define "node-holder.cronField" -}}
{{- $high := .high | int }}
{{- $chosen := list }}
{{- range splitList "," .field }}
{{- $match := regexMatch "^(\\*|\\?|[0-9]+(-[0-9]+)?)(/[0-9]+)?$" . }}
{{- $base := regexReplaceAll "/.*$" . "" }}
{{- $step := regexReplaceAll "^[^/]*/?" . "" | default "1" | atoi }}
{{- $from := 0 }}{{ $to := $high }}
{{- if not (has $base (list "*" "?")) }}
{{- $from = regexReplaceAll "-.*$" $base "" | atoi }}
{{- $to = ternary (regexReplaceAll "^.*-" $base "" | atoi) (ternary $high $from (contains "/" .)) (contains "-" $base) }}
{{- end }}
{{- if or (not $match) (lt $step 1) (gt $to $high) (gt $from $to) }}
{{- fail (printf "schedule: %s has %s in a field that takes 0 to %d; use e.g. '* * * * *'" (include "node-holder.repr" $.schedule) (include "node-holder.repr" .) $high) }}
{{- end }}
{{- range $value := untilStep $from (add1 $to | int) $step }}{{ $chosen = append $chosen $value }}{{ end }}
{{- end }}
{{- $out := list }}
{{- range $value := until (add1 $high | int) }}{{ if has $value $chosen }}{{ $out = append $out $value }}{{ end }}{{ end }}
{{- toJson $out }}
{{- end }}
