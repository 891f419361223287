// langfx-src-sha256: 67d2e2439b01c9715da0f3ab367461c943059b5d041f7a9fece9fcbb4059e800
// Built from js/src by js/build.mjs; do not edit.
var v={EVENTS:"events",SNAPSHOT:"snapshot",SYNC:"sync",RENDERED:"rendered",DECISION:"decision",DECISION_RESULT:"decision_result",DETAIL_REQUEST:"detail_request",DETAIL:"detail"};function o(e,n={},...l){let i=document.createElement(e);for(let[t,r]of Object.entries(n))r===void 0||r===!1||(t==="class"?i.className=String(r):t==="text"?i.textContent=String(r):i.setAttribute(t,r===!0?"":String(r)));for(let t of l)t==null||t===!1||i.append(typeof t=="string"?document.createTextNode(t):t);return i}function S(e){for(;e.firstChild;)e.removeChild(e.firstChild)}async function O(e){try{return await navigator.clipboard.writeText(e),!0}catch{let n=o("textarea",{style:"position:fixed;left:-9999px;top:0"});n.value=e,document.body.append(n),n.select();let l=!1;try{l=document.execCommand("copy")}catch{l=!1}return n.remove(),l}}function _(e,n="Copy"){let l=o("button",{class:"lfx-btn lfx-copy",type:"button",title:"Copy to the clipboard",text:n});return l.addEventListener("click",async i=>{i.stopPropagation();let t=e();l.dataset.copied=t;let r=await O(t);l.textContent=r?"Copied":"Copy failed",setTimeout(()=>l.textContent=n,1200)}),l}function $(e){return typeof e=="string"?e:JSON.stringify(e,null,2)??String(e)}var h=1200,E=24;function R(e,n="lfx-text"){let l=e.split(`
`),i=e.length>h||l.length>E,t=o("pre",{class:n});if(!i)return t.textContent=e,t;let r=l.slice(0,E).join(`
`);r.length>h&&(r=r.slice(0,h)),t.textContent=r+"\u2026";let s=o("button",{class:"lfx-btn lfx-more",type:"button",text:`show all (${e.length.toLocaleString("en-US")} chars)`});return s.addEventListener("click",f=>{f.stopPropagation();let a=s.dataset.open==="1";t.textContent=a?r+"\u2026":e,s.dataset.open=a?"":"1",s.textContent=a?`show all (${e.length.toLocaleString("en-US")} chars)`:"show less"}),o("div",{class:"lfx-fold"},t,s)}function k(e,n=0,l=2){if(e===null||typeof e!="object"){if(typeof e=="string"&&(e.length>160||e.includes(`
`)))return R(e,"lfx-v lfx-v-string");let r=typeof e=="string"?e:JSON.stringify(e);return o("span",{class:`lfx-v lfx-v-${e===null?"null":typeof e}`,text:r??"undefined"})}let i=Array.isArray(e)?e.map((r,s)=>[String(s),r]):Object.entries(e);if(i.length===0)return o("span",{class:"lfx-v",text:Array.isArray(e)?"[]":"{}"});let t=o("ul",{class:"lfx-json"});for(let[r,s]of i)if(s!==null&&typeof s=="object"&&Object.keys(s).length>0){let a=Object.keys(s).length,d=o("details",{class:"lfx-jd"});d.open=n+1<l,d.append(o("summary",{},o("span",{class:"lfx-key",text:`${r}: `}),o("span",{class:"lfx-muted",text:Array.isArray(s)?`[${a}]`:`{${a}}`})),k(s,n+1,l)),t.append(o("li",{},d))}else t.append(o("li",{},o("span",{class:"lfx-key",text:`${r}: `}),k(s,n+1,l)));return t}function C(e){let n=o("div",{class:"lfx-md"}),l=e.split(`
`),i=[],t=null,r=null,s=()=>{i.length&&n.append(T("p",i.join(`
`))),i=[]};for(let f of l){if(r!==null){f.trimStart().startsWith("```")?(n.append(o("pre",{},o("code",{text:r.join(`
`)}))),r=null):r.push(f);continue}if(f.trimStart().startsWith("```")){s(),t=null,r=[];continue}let a=/^(#{1,4})\s+(.*)$/.exec(f),d=/^\s*[-*]\s+(.*)$/.exec(f);a?(s(),t=null,n.append(T(`h${a[1].length+2}`,a[2]))):d?(s(),t||n.append(t=o("ul")),t.append(T("li",d[1]))):f.trim()===""?(s(),t=null):(t=null,i.push(f))}return r!==null&&n.append(o("pre",{},o("code",{text:r.join(`
`)}))),s(),n}function T(e,n){let l=o(e),i=/(\*\*[^*]+\*\*|`[^`]+`|\*[^*\s][^*]*\*)/g,t=0;for(let r of n.matchAll(i)){let s=r.index??0;s>t&&l.append(n.slice(t,s));let f=r[0];f.startsWith("**")?l.append(o("strong",{text:f.slice(2,-2)})):f.startsWith("`")?l.append(o("code",{text:f.slice(1,-1)})):l.append(o("em",{text:f.slice(1,-1)})),t=s+f.length}return t<n.length&&l.append(n.slice(t)),l}var q=`
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
`;function L(e,n){e.append(o("style",{text:q+n}))}function j(){return{mode:"idle",value:null,text:"",open:[],done:[],status:"idle",error:null,tools:{},fields:[],field_errors:{},missing:[],title:""}}var m=e=>JSON.stringify(e);function g(e,n,l){if(n.length===0)return l(e);let[i,...t]=n,r;typeof i=="number"?r=Array.isArray(e)?e:[]:r=e&&typeof e=="object"&&!Array.isArray(e)?e:{};let s=r[i];return r[i]=g(s,t,l),r}function N(e,n){var i;let l=n.path??[];switch(n.op){case"reset":Object.assign(e,j(),{mode:n.mode??"object",status:"streaming",fields:e.fields,title:e.title});break;case"set":e.mode="object",e.value=g(e.value,l,()=>n.value);break;case"open":{let t=m(l);e.open.includes(t)||e.open.push(t),n.value!==void 0&&(e.value=g(e.value,l,r=>r??n.value));break}case"append":e.value=g(e.value,l,t=>(typeof t=="string"?t:"")+String(n.delta??""));break;case"done":{let t=m(l);e.open=e.open.filter(r=>r!==t),e.done.includes(t)||e.done.push(t),"value"in n&&(e.value=g(e.value,l,()=>n.value));break}case"text":e.mode="text",e.text+=String(n.delta??"");break;case"tool":{let t=String(n.id),r=(i=e.tools)[t]??(i[t]={name:"",args_text:"",done:!1});typeof n.name=="string"&&(r.name=n.name),typeof n.delta=="string"&&(r.args_text+=n.delta),"args"in n&&(r.args=n.args,r.done=!0);break}case"status":e.status=String(n.status),n.error!=null&&(e.error=String(n.error)),"value"in n&&n.value!==void 0&&(e.value=n.value),n.field_errors&&typeof n.field_errors=="object"&&(e.field_errors={...n.field_errors},e.missing=Array.isArray(n.missing)?n.missing.slice():[]);break}}var H=`
.lfx-sv{border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:4px;padding:6px 8px;background:var(--jp-layout-color0,#fff)}
.lfx-sv-head{display:flex;align-items:center;gap:8px;margin-bottom:4px}
.lfx-sv-head .lfx-copy{margin-left:auto}
.lfx-sv ul,.lfx-sv li{list-style:none;margin:0}
.lfx-sv ul{padding-left:14px}
.lfx-sv .lfx-open>.lfx-key::after{content:" \u2026";color:var(--lfx-run)}
.lfx-sv .lfx-done>.lfx-key::before{content:"\u2713 ";color:color-mix(in srgb,var(--lfx-ok) 75%,var(--lfx-fg0))}
.lfx-sv .lfx-failed>.lfx-key::before{content:"\u2717 ";color:color-mix(in srgb,var(--lfx-bad) 75%,var(--lfx-fg0))}
.lfx-sv .lfx-failed>.lfx-key{color:color-mix(in srgb,var(--lfx-bad) 75%,var(--lfx-fg0))}
.lfx-sv .lfx-field-err{margin-left:6px}
.lfx-sv .lfx-pending{color:var(--jp-ui-font-color2,#757575);font-style:italic}
.lfx-sv .lfx-pending>.lfx-key::before{content:"\u25CB "}
.lfx-sv .lfx-md p{margin:2px 0}
`,P=new Set(["parsing_failed","generation_failed"]);function A(e,n,l,i,t){if(n===null||typeof n!="object"){let f=typeof n=="string"?n:n===void 0?"":JSON.stringify(n);return o("span",{class:`lfx-v lfx-v-${n===null?"null":typeof n}`,text:f})}let r=Array.isArray(n)?n.map((f,a)=>[a,f]):Object.entries(n),s=o("ul");for(let[f,a]of r){let d=[...l,f],c=m(d),x=e.field_errors[c],y=x?"lfx-failed":t.has(c)?"lfx-done":i.has(c)?"lfx-open":"",p=o("li",{class:y,"data-path":c},o("span",{class:"lfx-key",text:`${f}: `}),A(e,a,d,i,t));x&&p.append(o("span",{class:"lfx-err lfx-field-err",text:`\u2014 ${x}`})),s.append(p)}if(l.length===0&&!Array.isArray(n)){let f=n,a=e.status!=="streaming"&&e.status!=="idle";for(let d of e.fields){if(d.name in f)continue;let c=m([d.name]),x=e.missing.includes(c)||a&&P.has(e.status)&&d.required;s.append(o("li",{class:x?"lfx-failed":"lfx-pending","data-path":c},o("span",{class:"lfx-key",text:`${d.name}: `}),o("span",{class:x?"lfx-err":"",text:x?"missing (required)":a?"not given":"not started"})))}}return s}function M(e){return e.mode==="text"?e.status==="done"||e.status==="complete"?"done":"":e.status==="complete"?"\u2713 validated":""}var U=()=>{let e=j(),n=0,l=new Set,i=t=>{!t||typeof t!="object"||!t.mode||(Object.assign(e,j(),t),n=typeof t.seq=="number"?t.seq:n)};return{initialize({model:t}){i(t.get("state")),t.on("change:state",()=>{let r=t.get("state");if(!(!r||typeof r.seq!="number")&&(r.seq>n||r.seq===0&&n===0)){i(r);for(let s of l)s()}}),t.on("msg:custom",r=>{if(r?.kind===v.EVENTS){if(typeof r.seq=="number"&&r.seq<=n)return;n=r.seq??n;for(let s of r.events)N(e,s)}else if(r?.kind===v.SNAPSHOT)i({...r.state,seq:r.seq});else return;for(let s of l)s()})},render({model:t,el:r}){let s=o("div",{class:"lfx lfx-sv"});L(s,H);let f=o("div",{class:"lfx-muted"}),a=o("div",{class:"lfx-sv-body"}),d=o("div");s.append(f,a,d),r.append(s);let c=0;f.className="lfx-sv-head";let x=()=>{c=0,S(f),f.append(o("b",{class:"lfx-sv-title",text:e.title||"Answer"}),o("span",{class:`lfx-st lfx-st-${e.status}`,text:e.status})),(e.mode==="text"?e.text:e.value!=null)&&f.append(_(()=>e.mode==="text"?e.text:$(e.value))),S(a),e.mode==="text"?a.append(C(e.text)):e.value!==null&&e.value!==void 0?a.append(A(e,e.value,[],new Set(e.open),new Set(e.done))):e.fields.length&&e.mode!=="idle"&&a.append(A(e,{},[],new Set,new Set));let p=Object.entries(e.tools);if(p.length){let b=o("ul",{class:"lfx-sv-tools"});for(let[w,u]of p)b.append(o("li",{class:u.done?"lfx-done":"lfx-open"},o("span",{class:"lfx-key",text:`tool call ${u.name} (${w}) `}),u.done?k(u.args):o("code",{text:u.args_text})));a.append(b)}if(S(d),e.missing.length){let b=e.missing.map(w=>JSON.parse(w).join("."));d.append(o("div",{class:"lfx-err lfx-sv-missing",text:`missing required: ${b.join(", ")}`}))}e.error?d.append(o("div",{class:"lfx-err",text:e.error})):M(e)&&d.append(o("div",{class:"lfx-muted lfx-sv-verdict",text:M(e)}))},y=()=>{c||(c=requestAnimationFrame(x))};return l.add(y),x(),t.send({kind:v.SYNC,seq:n}),()=>{l.delete(y),c&&cancelAnimationFrame(c)}}}};export{U as default,k as jsonTree};
