// langfx-src-sha256: 67d2e2439b01c9715da0f3ab367461c943059b5d041f7a9fece9fcbb4059e800
// Built from js/src by js/build.mjs; do not edit.
var j={EVENTS:"events",SNAPSHOT:"snapshot",SYNC:"sync",RENDERED:"rendered",DECISION:"decision",DECISION_RESULT:"decision_result",DETAIL_REQUEST:"detail_request",DETAIL:"detail"};function e(t,i={},...o){let l=document.createElement(t);for(let[n,r]of Object.entries(i))r===void 0||r===!1||(n==="class"?l.className=String(r):n==="text"?l.textContent=String(r):l.setAttribute(n,r===!0?"":String(r)));for(let n of o)n==null||n===!1||l.append(typeof n=="string"?document.createTextNode(n):n);return l}function k(t){for(;t.firstChild;)t.removeChild(t.firstChild)}var _=1200,A=24;function H(t,i="lfx-text"){let o=t.split(`
`),l=t.length>_||o.length>A,n=e("pre",{class:i});if(!l)return n.textContent=t,n;let r=o.slice(0,A).join(`
`);r.length>_&&(r=r.slice(0,_)),n.textContent=r+"\u2026";let f=e("button",{class:"lfx-btn lfx-more",type:"button",text:`show all (${t.length.toLocaleString("en-US")} chars)`});return f.addEventListener("click",b=>{b.stopPropagation();let c=f.dataset.open==="1";n.textContent=c?r+"\u2026":t,f.dataset.open=c?"":"1",f.textContent=c?`show all (${t.length.toLocaleString("en-US")} chars)`:"show less"}),e("div",{class:"lfx-fold"},n,f)}function S(t,i=0,o=2){if(t===null||typeof t!="object"){if(typeof t=="string"&&(t.length>160||t.includes(`
`)))return H(t,"lfx-v lfx-v-string");let r=typeof t=="string"?t:JSON.stringify(t);return e("span",{class:`lfx-v lfx-v-${t===null?"null":typeof t}`,text:r??"undefined"})}let l=Array.isArray(t)?t.map((r,f)=>[String(f),r]):Object.entries(t);if(l.length===0)return e("span",{class:"lfx-v",text:Array.isArray(t)?"[]":"{}"});let n=e("ul",{class:"lfx-json"});for(let[r,f]of l)if(f!==null&&typeof f=="object"&&Object.keys(f).length>0){let c=Object.keys(f).length,d=e("details",{class:"lfx-jd"});d.open=i+1<o,d.append(e("summary",{},e("span",{class:"lfx-key",text:`${r}: `}),e("span",{class:"lfx-muted",text:Array.isArray(f)?`[${c}]`:`{${c}}`})),S(f,i+1,o)),n.append(e("li",{},d))}else n.append(e("li",{},e("span",{class:"lfx-key",text:`${r}: `}),S(f,i+1,o)));return n}var O=`
.lfx{font:12px/1.4 var(--jp-ui-font-family,system-ui,sans-serif);color:var(--jp-ui-font-color1,#222);
  --lfx-ok:var(--jp-success-color1,#4caf50);--lfx-bad:var(--jp-error-color1,#f44336);--lfx-warn:var(--jp-warn-color1,#ff9800);
  --lfx-run:var(--jp-brand-color1,#2196f3);--lfx-fg0:var(--jp-ui-font-color0,#000)}
.lfx .lfx-muted{color:var(--jp-ui-font-color2,#757575)}
.lfx .lfx-st{display:inline-block;box-sizing:border-box;min-width:72px;text-align:center;font-size:11px;line-height:16px;padding:0 6px;border-radius:8px;white-space:nowrap;
  color:var(--jp-ui-font-color1,#222);--lfx-c:var(--jp-border-color1,#bdbdbd);border:1px solid var(--lfx-c);background:color-mix(in srgb,var(--lfx-c) 22%,transparent)}
.lfx .lfx-st-running,.lfx .lfx-st-streaming{--lfx-c:var(--lfx-run)}
.lfx .lfx-st-ok,.lfx .lfx-st-complete,.lfx .lfx-st-done{--lfx-c:var(--lfx-ok)}
.lfx .lfx-st-failed,.lfx .lfx-st-timed_out,.lfx .lfx-st-generation_failed,.lfx .lfx-st-parsing_failed{--lfx-c:var(--lfx-bad)}
.lfx .lfx-st-denied,.lfx .lfx-st-cancelled,.lfx .lfx-st-ended{--lfx-c:var(--lfx-warn)}
.lfx ul.lfx-json,.lfx ul.lfx-json>li{list-style:none;margin:0}
.lfx ul.lfx-json{padding-left:14px}
.lfx details.lfx-jd>summary{cursor:pointer;list-style:none}
.lfx details.lfx-jd>summary::-webkit-details-marker{display:none}
.lfx details.lfx-jd>summary::before{content:"\u25B8 ";color:var(--jp-ui-font-color1,#222)}
.lfx details.lfx-jd[open]>summary::before{content:"\u25BE "}
.lfx .lfx-key{color:var(--jp-ui-font-color2,#616161)}
.lfx .lfx-v-string{white-space:pre-wrap;word-break:break-word}
.lfx pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font-family:var(--jp-code-font-family,monospace);font-size:12px}
.lfx .lfx-err{color:color-mix(in srgb,var(--lfx-bad) 72%,var(--lfx-fg0));white-space:pre-wrap}
.lfx .lfx-btn,.lfx button{font:inherit;font-size:11px;margin:2px 4px 2px 0;padding:1px 8px;cursor:pointer;border-radius:4px;
  border:1px solid var(--jp-border-color1,#bdbdbd);background:var(--jp-layout-color1,#fff);color:var(--jp-ui-font-color1,#222)}
.lfx button:hover{background:var(--jp-layout-color2,#eee)}
.lfx button:disabled{opacity:.5;cursor:default}
.lfx button.lfx-primary{background:var(--jp-brand-color1,#2196f3);border-color:var(--jp-brand-color0,#1976d2);color:#fff;font-weight:600}
.lfx button.lfx-primary:hover{background:var(--jp-brand-color0,#1976d2)}
.lfx button.lfx-danger{background:transparent;border-color:var(--lfx-bad);color:color-mix(in srgb,var(--lfx-bad) 72%,var(--lfx-fg0))}
.lfx button.lfx-danger:hover{background:color-mix(in srgb,var(--lfx-bad) 15%,transparent)}
.lfx button.lfx-copy{padding:0 6px;font-size:10px;float:none}
.lfx .lfx-fold>button.lfx-more{margin-top:2px}
.lfx .lfx-chat{display:flex;flex-direction:column;gap:6px}
.lfx .lfx-msg{border:1px solid var(--jp-border-color2,#e0e0e0);border-left:3px solid var(--jp-border-color1,#bdbdbd);border-radius:4px;padding:4px 8px;background:var(--jp-layout-color1,#fff)}
.lfx .lfx-msg-system{border-left-color:var(--lfx-warn)}
.lfx .lfx-msg-user{border-left-color:var(--lfx-run)}
.lfx .lfx-msg-assistant,.lfx .lfx-msg-ai,.lfx .lfx-msg-model{border-left-color:var(--lfx-ok)}
.lfx .lfx-msg-result,.lfx .lfx-msg-tool{border-left-color:var(--jp-ui-font-color2,#757575)}
.lfx .lfx-msg-reasoning{border-left-style:dashed;border-left-color:var(--jp-ui-font-color2,#757575);color:var(--jp-ui-font-color2,#757575)}
.lfx .lfx-msg-call{margin-top:4px;background:var(--jp-layout-color2,#f5f5f5)}
.lfx .lfx-msg-head{display:flex;align-items:center;gap:6px;margin-bottom:2px}
.lfx .lfx-msg-role{font-weight:600;text-transform:capitalize;font-size:11px}
.lfx .lfx-msg-head .lfx-copy{margin-left:auto}
.lfx .lfx-field-name{margin-top:4px}
`;function N(t,i){t.append(e("style",{text:O+i}))}function M(t,i){let o=t;for(let l=0;l<8&&o&&typeof o.$ref=="string";l++){let n=/^#\/(\$defs|definitions)\/(.+)$/.exec(o.$ref);o=n?i?.[n[1]]?.[n[2]]??{}:{}}if(o&&Array.isArray(o.anyOf)){let l=o.anyOf.filter(n=>n?.type!=="null");if(l.length===1)return{...M(l[0],i),nullable:!0}}return o??{}}function I(t){return Array.isArray(t.enum)?"enum":t.type==="boolean"||t.type==="integer"||t.type==="number"||t.type==="string"?t.type:"json"}function R(t,i,o,l=[]){switch(t){case"boolean":return!!i;case"integer":case"number":{let n=String(i).trim(),r=Number(n);if(n===""||!Number.isFinite(r)||t==="integer"&&!Number.isInteger(r))throw new Error(`${o}: expected ${t==="integer"?"an integer":"a number"}`);return r}case"enum":{let n=Number(i);return l[n]}case"string":return String(i);default:try{return JSON.parse(String(i))}catch{throw new Error(`${o}: not valid JSON`)}}}function C(t,i){let o=t??{},l=M(o,o),n=l.properties??{},r=Object.keys(n).length?Object.keys(n):Object.keys(i),f=e("div",{class:"lfx-form"}),b=[];for(let c of r){let d=M(n[c]??{},o),x=I(d),g=i[c]??d.default,s=e("label",{class:"lfx-form-row"},e("span",{class:"lfx-key",text:`${c}${(l.required??[]).includes(c)?" *":""}`}));d.description&&(s.title=String(d.description));let a;x==="boolean"?(a=e("input",{type:"checkbox",name:c}),a.checked=!!g):x==="enum"?(a=e("select",{name:c}),d.enum.forEach((m,h)=>{let v=e("option",{value:String(h),text:typeof m=="string"?m:JSON.stringify(m)});JSON.stringify(m)===JSON.stringify(g)&&(v.selected=!0),a.append(v)})):x==="json"?(a=e("textarea",{name:c,rows:3}),a.value=g===void 0?"":JSON.stringify(g,null,1)):(a=e("input",{type:x==="string"?"text":"number",name:c,step:x==="number"?"any":void 0}),a.value=g==null?"":String(g));let p=e("span",{class:"lfx-err lfx-field-error",role:"alert"});s.append(a,p),f.append(s);let y=a;b.push({name:c,read:()=>R(x,x==="boolean"?y.checked:y.value,c,d.enum??[]),mark(m){p.textContent=m,s.classList.toggle("lfx-invalid",!!m),m?y.setAttribute("aria-invalid","true"):y.removeAttribute("aria-invalid")}})}return{el:f,read(){let c={},d=null;for(let x of b)try{c[x.name]=x.read(),x.mark("")}catch(g){x.mark(g.message),d??(d=g)}if(d)throw d;return c}}}var D=`
.lfx-ap{border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:4px;padding:6px 8px;background:var(--jp-layout-color0,#fff)}
.lfx-ap-pending{border-left:3px solid var(--lfx-warn);padding-left:8px;margin-bottom:6px}
.lfx-ap-buttons{display:flex;flex-wrap:wrap;align-items:center;gap:4px;margin-top:6px}
.lfx-ap-buttons label{margin-left:8px}
.lfx-form-row{display:flex;flex-wrap:wrap;gap:6px;align-items:center;margin:3px 0}
.lfx-form-row input,.lfx-form-row textarea,.lfx-form-row select,.lfx-ap input.lfx-note{font:inherit;padding:2px 6px;border:1px solid var(--jp-border-color1,#bdbdbd);border-radius:3px;background:var(--jp-layout-color1,#fff);color:var(--jp-ui-font-color1,#222)}
.lfx-form-row input[type=text],.lfx-form-row textarea{min-width:260px}
.lfx-form-row.lfx-invalid input,.lfx-form-row.lfx-invalid textarea{border-color:var(--lfx-bad)}
.lfx-ap-note{display:flex;gap:6px;align-items:center;margin-top:4px}
.lfx-ap input.lfx-note{flex:1;min-width:320px}
.lfx-ap-hist,.lfx-ap-hist li{list-style:none;margin:0}
.lfx-ap-hist{margin-top:4px;padding-left:4px}
`,W={render({model:t,el:i}){let o=e("div",{class:"lfx lfx-ap"});N(o,D);let l=e("div"),n=e("div");o.append(l,n),i.append(o);let r="",f="",b=()=>{let s=t.get("state")??{},a=s.pending;if(c(s.history??[]),!a){r="",k(l),(s.history??[]).length||l.append(e("div",{class:"lfx-muted",text:"No tool calls waiting for approval."}));return}a.prompt_id!==r&&(r=a.prompt_id,f="",d(a),t.send({kind:j.RENDERED,prompt_id:a.prompt_id}))};function c(s){if(k(n),!s.length)return;let a=e("ul",{class:"lfx-ap-hist"});for(let p of s){let y=p.note?` \u2014 \u201C${p.note}\u201D`:"";a.append(e("li",{},e("span",{class:`lfx-st lfx-st-${p.approved?"ok":"denied"}`,text:p.decision})," ",e("b",{text:String(p.tool)}),e("span",{class:"lfx-muted",text:` (${p.call_id}) by ${p.who} at ${p.when}${y}`})))}n.append(a)}function d(s){k(l);let a=e("div",{class:"lfx-ap-pending","data-call-id":s.call_id}),p=e("div",{class:"lfx-err"});a.append(e("div",{},"Tool call ",e("b",{class:"lfx-ap-tool",text:String(s.tool)}),e("span",{class:"lfx-muted",text:` (${s.call_id})`})),s.description?e("div",{class:"lfx-muted lfx-ap-desc",text:String(s.description)}):"",e("div",{class:"lfx-key",text:"arguments:"}),e("div",{class:"lfx-ap-args"},S(s.args??{})));let y=e("input",{type:"checkbox",class:"lfx-ap-always"}),m=[],h=(u,w,L)=>{let $=e("button",{class:w,text:u});return $.addEventListener("click",L),m.push($),$},v=(u,w={})=>{for(let L of m)L.disabled=!0;p.textContent="",t.send({kind:j.DECISION,prompt_id:s.prompt_id,call_id:s.call_id,action:u,always:y.checked,...w})},E=e("div"),T=e("div");a.append(e("div",{class:"lfx-ap-buttons"},h("Approve","lfx-approve lfx-primary",()=>v("approve")),h("Edit arguments\u2026","lfx-edit",()=>{k(E);let u=C(s.schema,s.args??{});E.append(u.el,h("Approve with these arguments","lfx-approve-edited lfx-primary",()=>{try{v("approve_edited",{args:u.read()})}catch(w){u.el.querySelector(".lfx-field-error:not(:empty)")||(p.textContent=w.message)}}))}),h("Deny","lfx-deny lfx-danger",()=>v("deny")),h("Deny with note\u2026","lfx-deny-note-open lfx-danger",()=>{k(T);let u=e("input",{type:"text",placeholder:"Tell the model why (it continues the run)",class:"lfx-note","aria-label":"note for the model"});T.append(e("div",{class:"lfx-ap-note"},u,h("Send denial","lfx-deny-note lfx-danger",()=>v("deny_note",{note:u.value})))),u.focus()}),e("label",{},y," always allow this tool for this run")),E,T,p),l.append(a),x=u=>{if(u.prompt_id===s.prompt_id&&!u.ok){p.textContent=String(u.error??"refused");for(let w of m)w.disabled=!1}},f&&(p.textContent=f)}let x=null,g=s=>{s?.kind===j.DECISION_RESULT&&x&&x(s)};return t.on("msg:custom",g),t.on("change:state",b),b(),()=>{t.off("msg:custom",g),t.off("change:state",b)}}};export{W as default};
