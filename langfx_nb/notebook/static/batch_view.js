// langfx-src-sha256: 29d4b6491e5c04801d84d5602abf22530cc74017a58d7afd375c8a4dd568ff20
// Built from js/src by js/build.mjs; do not edit.
var j={EVENTS:"events",SNAPSHOT:"snapshot",SYNC:"sync",RENDERED:"rendered",DECISION:"decision",DECISION_RESULT:"decision_result",DETAIL_REQUEST:"detail_request",DETAIL:"detail",CANCEL:"cancel",OPEN_GROUP:"open_group"};function r(e,n={},...s){let l=document.createElement(e);for(let[t,o]of Object.entries(n))o===void 0||o===!1||(t==="class"?l.className=String(o):t==="text"?l.textContent=String(o):l.setAttribute(t,o===!0?"":String(o)));for(let t of s)t==null||t===!1||l.append(typeof t=="string"?document.createTextNode(t):t);return l}function h(e){for(;e.firstChild;)e.removeChild(e.firstChild)}var W=`
.lfx{font:12px/1.4 var(--jp-ui-font-family,system-ui,sans-serif);color:var(--jp-ui-font-color1,#222);
  --lfx-ok:var(--jp-success-color1,#4caf50);--lfx-bad:var(--jp-error-color1,#f44336);--lfx-warn:var(--jp-warn-color1,#ff9800);
  --lfx-run:var(--jp-brand-color1,#2196f3);--lfx-paused:var(--jp-info-color1,#0097a7);--lfx-fg0:var(--jp-ui-font-color0,#000)}
.lfx .lfx-muted{color:var(--jp-ui-font-color2,#757575)}
.lfx .lfx-st{display:inline-block;box-sizing:border-box;min-width:72px;text-align:center;font-size:11px;line-height:16px;padding:0 6px;border-radius:8px;white-space:nowrap;
  color:var(--jp-ui-font-color1,#222);--lfx-c:var(--jp-border-color1,#bdbdbd);border:1px solid var(--lfx-c);background:color-mix(in srgb,var(--lfx-c) 22%,transparent)}
.lfx .lfx-st-running,.lfx .lfx-st-streaming{--lfx-c:var(--lfx-run)}
.lfx .lfx-st-ok,.lfx .lfx-st-complete,.lfx .lfx-st-done{--lfx-c:var(--lfx-ok)}
.lfx .lfx-st-failed,.lfx .lfx-st-timed_out,.lfx .lfx-st-generation_failed,.lfx .lfx-st-parsing_failed{--lfx-c:var(--lfx-bad)}
.lfx .lfx-st-denied,.lfx .lfx-st-cancelled,.lfx .lfx-st-ended{--lfx-c:var(--lfx-warn)}
.lfx .lfx-st-suspended{--lfx-c:var(--lfx-paused);border-style:dashed}
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
`;function R(e,n){e.append(r("style",{text:W+n}))}function F(e,n,s){let l=!1,t=()=>{l||(l=!0,s())},o=()=>{e.classList.contains("jupyter-widgets-disconnected")&&t()},a=new MutationObserver(o);a.observe(e,{attributes:!0,attributeFilter:["class"]}),queueMicrotask(o);let f=null;try{f=n?.widget_manager?.kernel??null}catch{f=null}let g=(v,u)=>{["starting","restarting","autorestarting","dead"].includes(u)&&t()};f?.statusChanged?.connect?.(g),f?.status==="dead"&&queueMicrotask(t);let b=null,m=(v,u)=>{if(u?.header?.msg_type==="shutdown_reply")return t();let c=u?.header?.session;typeof c!="string"||!c||(b===null?b=c:c!==b&&t())};return f?.iopubMessage?.connect?.(m),()=>{a.disconnect(),f?.statusChanged?.disconnect?.(g),f?.iopubMessage?.disconnect?.(m)}}function C(e,n){try{return e.send(n),!0}catch{return!1}}function A(e,n=60){let s=e.closest(".jp-OutputArea-child");s?s.classList.add("lfx-live-child"):n>0&&requestAnimationFrame(()=>A(e,n-1))}function N(){return{title:"",status:"running",name:"batch",total:0,done:0,failed:0,running:0,left:0,resumed:0,elapsed_s:0,items_per_s:0,tokens_per_s:0,eta_s:null,requests:0,usage:{},cost:null,unpriced_models:[],errors:[],finished:!1,batch_node_id:null,session_id:null,opened:null,open_error:""}}var G=new Set(["opened","open_error","title"]);function D(e,n){if(n.op==="progress"){let s=n.progress;for(let[l,t]of Object.entries(s))G.has(l)||(e[l]=t)}else n.op==="open"&&(e.opened=n.type,e.open_error=n.open_error??"")}function p(e){return typeof e=="number"?e.toLocaleString("en-US"):"?"}function O(e,n){if(typeof e!="number"||!Number.isFinite(e))return`\u2014 ${n}/s`;let s=e>=100?0:e>=10?1:2;return`${e.toFixed(s)} ${n}/s`}function H(e){return typeof e!="number"||!Number.isFinite(e)||e<0?"unknown":e<10?`${e.toFixed(1)} s`:e<60?`${Math.round(e)} s`:e<3600?`${Math.floor(e/60)}m${String(Math.floor(e%60)).padStart(2,"0")}s`:`${Math.floor(e/3600)}h${String(Math.floor(e%3600/60)).padStart(2,"0")}m`}function I(e,n=[]){if(typeof e!="number")return"cost unknown";let s=e<.01?`$${e.toFixed(4)}`:`$${e.toFixed(2)}`;return n.length?`${s} + unknown (no price for ${n.join(", ")})`:s}function z(e){let n=e??{},s=n.prompt_tokens,l=n.completion_tokens,t=typeof n.total_tokens=="number"?n.total_tokens:typeof s=="number"&&typeof l=="number"?s+l:null;if(t===null)return"tokens unknown";let o=typeof s=="number"&&typeof l=="number"?` (${p(s)} in \xB7 ${p(l)} out)`:"";return`${p(t)} tokens${o}`}function U(e){return e.total?{done:Math.min(1,e.done/e.total),failed:Math.min(1,e.failed/e.total)}:{done:e.finished?1:0,failed:0}}var V=`
.lfx-bv{border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:4px;padding:6px 8px;background:var(--jp-layout-color0,#fff)}
.lfx-bv-head{display:flex;align-items:center;gap:8px;flex-wrap:wrap}
.lfx-bv-bar{position:relative;height:8px;border-radius:4px;margin:6px 0;background:var(--jp-layout-color2,#eee);overflow:hidden}
.lfx-bv-bar>span{position:absolute;top:0;bottom:0}
.lfx-bv-ok{left:0;background:var(--lfx-ok)}
.lfx-bv-bad{background:var(--lfx-bad)}
.lfx-bv-counts{display:flex;gap:14px;flex-wrap:wrap}
.lfx-bv-counts b{font-variant-numeric:tabular-nums}
.lfx-bv-stats{display:flex;gap:14px;flex-wrap:wrap;margin-top:2px}
.lfx-bv-groups{margin-top:6px;border-top:1px solid var(--jp-border-color2,#e0e0e0);padding-top:4px}
.lfx-bv-group{display:flex;gap:8px;align-items:baseline;padding:2px 0}
.lfx-bv .lfx-bv-group>*{flex:none;white-space:nowrap}
.lfx-bv .lfx-bv-group .lfx-bv-cls{font-weight:600}
.lfx-bv .lfx-bv-group .lfx-bv-msg{flex:1 1 auto;min-width:0;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.lfx-bv-group.lfx-bv-open{background:var(--jp-layout-color2,#f5f5f5)}
.lfx-bv-traces{margin-top:6px}
`,J={running:"running",done:"ok",stopped:"cancelled"},oe=()=>{let e=N(),n=0,s=new Set,l=t=>{!t||typeof t!="object"||!("done"in t)||(Object.assign(e,N(),t),n=typeof t.seq=="number"?t.seq:n)};return{initialize({model:t}){l(t.get("state")),t.on("change:state",()=>{let o=t.get("state");if(!(!o||typeof o.seq!="number")&&(o.seq>n||o.seq===0&&n===0)){l(o);for(let a of s)a()}}),t.on("msg:custom",o=>{if(o?.kind===j.EVENTS){if(typeof o.seq=="number"&&o.seq<=n)return;n=o.seq??n;for(let a of o.events)D(e,a)}else if(o?.kind===j.SNAPSHOT)l({...o.state,seq:o.seq});else return;for(let a of s)a()})},render({model:t,el:o}){let a=r("div",{class:"lfx lfx-bv"});R(a,V);let f=r("div",{class:"lfx-bv-head"}),g=r("div",{class:"lfx-bv-bar",role:"progressbar"}),b=r("span",{class:"lfx-bv-ok"}),m=r("span",{class:"lfx-bv-bad"});g.append(b,m);let v=r("div",{class:"lfx-bv-counts"}),u=r("div",{class:"lfx-bv-stats lfx-muted"}),c=r("div",{class:"lfx-bv-groups"}),S=r("div",{class:"lfx-bv-traces"});a.append(f,g,v,u,c,S),o.append(a),A(o);let w=0,P=!1,E="",$=null,B=async()=>{let d=String(t.get("explorer")??"");if(d===E||(E=d,$?.remove?.(),$=null,h(S),!d))return;let y=t.widget_manager;try{let x=await y.get_model(d.replace(/^IPY_MODEL_/,"")),i=await y.create_view(x,{});if(E!==d)return i.remove?.();$=i,S.append(i.el),i.trigger?.("displayed")}catch(x){S.append(r("div",{class:"lfx-err",text:`could not show the traces here: ${String(x)}`}))}},q=()=>{w=0,h(f);let d=e.status||"running";f.append(r("b",{class:"lfx-bv-title",text:e.title||e.name||"batch"}),r("span",{class:`lfx-st lfx-st-${J[d]??"running"}`,"data-status":d,text:d})),P&&!e.finished&&f.append(r("span",{class:"lfx-err",text:" kernel restarted \u2014 this batch stopped here"}));let y=U(e);b.style.width=`${(y.done*100).toFixed(2)}%`,m.style.left=`${(y.done*100).toFixed(2)}%`,m.style.width=`${(y.failed*100).toFixed(2)}%`,g.setAttribute("aria-valuenow",String(e.done+e.failed)),g.setAttribute("aria-valuemax",String(e.total??"")),h(v);let x=(i,k,_)=>r("span",{class:`lfx-bv-n lfx-bv-${_}`,"data-count":_},r("b",{text:p(k)}),` ${i}`);v.append(x("done",e.done,"done"),x("failed",e.failed,"failed"),x("running",e.running,"running"),x("left",e.left,"left"),r("span",{class:"lfx-muted",text:`of ${p(e.total)}${e.resumed?` (${p(e.resumed)} resumed)`:""}`})),h(u),u.append(r("span",{text:O(e.items_per_s,"items")}),r("span",{text:O(e.tokens_per_s,"tokens")}),r("span",{"data-eta":"",text:e.finished?`took ${H(e.elapsed_s)}`:`ETA ${H(e.eta_s)}`}),r("span",{text:`${p(e.requests)} requests`}),r("span",{"data-usage":"",text:z(e.usage)}),r("span",{"data-cost":"",text:I(e.cost,e.unpriced_models)})),h(c),c.style.display=e.errors.length?"":"none";for(let i of e.errors){let k=e.opened===i.type,_=i.node_ids.filter(M=>M).length,L=r("button",{class:"lfx-btn lfx-bv-open-btn",type:"button","data-group":i.type,text:k?"hide traces":`open traces (${_})`});L.disabled=!_,L.addEventListener("click",M=>{M.stopPropagation(),C(t,{kind:j.OPEN_GROUP,type:k?null:i.type})}),c.append(r("div",{class:`lfx-bv-group${k?" lfx-bv-open":""}`,"data-error":i.type},r("span",{class:"lfx-bv-cls lfx-err",text:i.type}),r("span",{class:"lfx-bv-cnt",text:`\xD7 ${p(i.count)}`}),r("span",{class:"lfx-err lfx-bv-msg",title:i.first_message,text:i.first_message}),r("span",{class:"lfx-muted",text:i.items.length?`items ${i.items.slice(0,5).join(", ")}${i.count>5?", \u2026":""}`:""}),L))}e.open_error&&c.append(r("div",{class:"lfx-err",text:e.open_error}))},T=()=>{w||(w=requestAnimationFrame(q))};s.add(T),t.on("change:explorer",()=>{B()}),q(),B(),C(t,{kind:j.SYNC,seq:n});let K=F(o,t,()=>{P=!0,T()});return()=>{K(),s.delete(T),$?.remove?.(),w&&cancelAnimationFrame(w)}}}};export{oe as default};
