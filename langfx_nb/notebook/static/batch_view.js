// langfx-src-sha256: 3082599428fbc3be97047c6611b1a1b2734cd302018a6ffb891ba60bb8d66cd7
// Built from js/src by js/build.mjs; do not edit.
var V=Object.defineProperty;var G=(e,t,n)=>t in e?V(e,t,{enumerable:!0,configurable:!0,writable:!0,value:n}):e[t]=n;var j=(e,t,n)=>G(e,typeof t!="symbol"?t+"":t,n);var y={EVENTS:"events",SNAPSHOT:"snapshot",SYNC:"sync",RENDERED:"rendered",DECISION:"decision",DECISION_RESULT:"decision_result",DETAIL_REQUEST:"detail_request",DETAIL:"detail",CANCEL:"cancel",OPEN_GROUP:"open_group",OPEN_TRACE:"open_trace",TRACE_OPENED:"trace_opened",WINDOW_REQUEST:"window_request",WINDOW:"window"};function o(e,t={},...n){let r=document.createElement(e);for(let[s,i]of Object.entries(t))i===void 0||i===!1||(s==="class"?r.className=String(i):s==="text"?r.textContent=String(i):r.setAttribute(s,i===!0?"":String(i)));for(let s of n)s==null||s===!1||r.append(typeof s=="string"?document.createTextNode(s):s);return r}function h(e){for(;e.firstChild;)e.removeChild(e.firstChild)}var J=`
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
.lfx .lfx-st-waiting{--lfx-c:var(--lfx-paused)}
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
`;function H(e,t){e.append(o("style",{text:J+t}))}function I(e,t,n){let r=!1,s=()=>{r||(r=!0,n())},i=()=>{e.classList.contains("jupyter-widgets-disconnected")&&s()},x=new MutationObserver(i);x.observe(e,{attributes:!0,attributeFilter:["class"]}),queueMicrotask(i);let a=null;try{a=t?.widget_manager?.kernel??null}catch{a=null}let v=(w,f)=>{["starting","restarting","autorestarting","dead"].includes(f)&&s()};a?.statusChanged?.connect?.(v),a?.status==="dead"&&queueMicrotask(s);let g=null,b=(w,f)=>{if(f?.header?.msg_type==="shutdown_reply")return s();let c=f?.header?.session;typeof c!="string"||!c||(g===null?g=c:c!==g&&s())};return a?.iopubMessage?.connect?.(b),()=>{x.disconnect(),a?.statusChanged?.disconnect?.(v),a?.iopubMessage?.disconnect?.(b)}}function C(e,t){try{return e.send(t),!0}catch{return!1}}function N(e,t=60){let n=e.closest(".jp-OutputArea-child");n?n.classList.add("lfx-live-child"):t>0&&requestAnimationFrame(()=>N(e,t-1))}var E=class{constructor(t,n){j(this,"load",t);j(this,"apply",n);j(this,"seq",0);j(this,"listeners",new Set)}adopt(t){t&&typeof t=="object"&&this.load(t)&&(this.seq=typeof t.seq=="number"?t.seq:this.seq)}notify(){for(let t of this.listeners)t()}follow(t){this.adopt(t.get("state")),t.on("change:state",()=>{let n=t.get("state");!n||typeof n.seq!="number"||(n.seq>this.seq||n.seq===0&&this.seq===0)&&(this.adopt(n),this.notify())}),t.on("msg:custom",n=>{if(n?.kind===y.EVENTS){if(typeof n.seq=="number"&&n.seq<=this.seq)return;this.seq=n.seq??this.seq;for(let r of n.events)this.apply(r)}else if(n?.kind===y.SNAPSHOT)this.adopt({...n.state,seq:n.seq});else return;this.notify()})}};function O(){return{title:"",status:"running",name:"batch",total:0,done:0,failed:0,running:0,left:0,resumed:0,elapsed_s:0,items_per_s:0,tokens_per_s:0,eta_s:null,requests:0,usage:{},cost:null,unpriced_models:[],errors:[],finished:!1,batch_node_id:null,session_id:null,opened:null,open_error:""}}var Y=new Set(["opened","open_error","title"]);function F(e,t){if(t.op==="progress"){let n=t.progress;for(let[r,s]of Object.entries(n))Y.has(r)||(e[r]=s)}else t.op==="open"&&(e.opened=t.type,e.open_error=t.open_error??"")}function p(e){return typeof e=="number"?e.toLocaleString("en-US"):"?"}function q(e,t){if(typeof e!="number"||!Number.isFinite(e))return`\u2014 ${t}/s`;let n=e>=100?0:e>=10?1:2;return`${e.toFixed(n)} ${t}/s`}function P(e){return typeof e!="number"||!Number.isFinite(e)||e<0?"unknown":e<10?`${e.toFixed(1)} s`:e<60?`${Math.round(e)} s`:e<3600?`${Math.floor(e/60)}m${String(Math.floor(e%60)).padStart(2,"0")}s`:`${Math.floor(e/3600)}h${String(Math.floor(e%3600/60)).padStart(2,"0")}m`}function z(e,t=[]){if(typeof e!="number")return"cost unknown";let n=e<.01?`$${e.toFixed(4)}`:`$${e.toFixed(2)}`;return t.length?`${n} + unknown (no price for ${t.join(", ")})`:n}function U(e){let t=e??{},n=t.prompt_tokens,r=t.completion_tokens,s=typeof t.total_tokens=="number"?t.total_tokens:typeof n=="number"&&typeof r=="number"?n+r:null;if(s===null)return"tokens unknown";let i=typeof n=="number"&&typeof r=="number"?` (${p(n)} in \xB7 ${p(r)} out)`:"";return`${p(s)} tokens${i}`}function W(e){return e.total?{done:Math.min(1,e.done/e.total),failed:Math.min(1,e.failed/e.total)}:{done:e.finished?1:0,failed:0}}var Q=`
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
`,X={running:"running",done:"ok",stopped:"cancelled"},pe=()=>{let e=O(),t=new E(r=>"done"in r?(Object.assign(e,O(),r),!0):!1,r=>F(e,r)),n=t.listeners;return{initialize({model:r}){t.follow(r)},render({model:r,el:s}){let i=o("div",{class:"lfx lfx-bv"});H(i,Q);let x=o("div",{class:"lfx-bv-head"}),a=o("div",{class:"lfx-bv-bar",role:"progressbar"}),v=o("span",{class:"lfx-bv-ok"}),g=o("span",{class:"lfx-bv-bad"});a.append(v,g);let b=o("div",{class:"lfx-bv-counts"}),w=o("div",{class:"lfx-bv-stats lfx-muted"}),f=o("div",{class:"lfx-bv-groups"}),c=o("div",{class:"lfx-bv-traces"});i.append(x,a,b,w,f,c),s.append(i),N(s);let k=0,D=!1,T="",$=null,B=async()=>{let d=String(r.get("explorer")??"");if(d===T||(T=d,$?.remove?.(),$=null,h(c),!d))return;let m=r.widget_manager;try{let u=await m.get_model(d.replace(/^IPY_MODEL_/,"")),l=await m.create_view(u,{});if(T!==d)return l.remove?.();$=l,c.append(l.el),l.trigger?.("displayed")}catch(u){c.append(o("div",{class:"lfx-err",text:`could not show the traces here: ${String(u)}`}))}},R=()=>{k=0,h(x);let d=e.status||"running";x.append(o("b",{class:"lfx-bv-title",text:e.title||e.name||"batch"}),o("span",{class:`lfx-st lfx-st-${X[d]??"running"}`,"data-status":d,text:d})),D&&!e.finished&&x.append(o("span",{class:"lfx-err",text:" kernel restarted \u2014 this batch stopped here"}));let m=W(e);v.style.width=`${(m.done*100).toFixed(2)}%`,g.style.left=`${(m.done*100).toFixed(2)}%`,g.style.width=`${(m.failed*100).toFixed(2)}%`,a.setAttribute("aria-valuenow",String(e.done+e.failed)),a.setAttribute("aria-valuemax",String(e.total??"")),h(b);let u=(l,_,S)=>o("span",{class:`lfx-bv-n lfx-bv-${S}`,"data-count":S},o("b",{text:p(_)}),` ${l}`);b.append(u("done",e.done,"done"),u("failed",e.failed,"failed"),u("running",e.running,"running"),u("left",e.left,"left"),o("span",{class:"lfx-muted",text:`of ${p(e.total)}${e.resumed?` (${p(e.resumed)} resumed)`:""}`})),h(w),w.append(o("span",{text:q(e.items_per_s,"items")}),o("span",{text:q(e.tokens_per_s,"tokens")}),o("span",{"data-eta":"",text:e.finished?`took ${P(e.elapsed_s)}`:`ETA ${P(e.eta_s)}`}),o("span",{text:`${p(e.requests)} requests`}),o("span",{"data-usage":"",text:U(e.usage)}),o("span",{"data-cost":"",text:z(e.cost,e.unpriced_models)})),h(f),f.style.display=e.errors.length?"":"none";for(let l of e.errors){let _=e.opened===l.type,S=l.node_ids.filter(M=>M).length,A=o("button",{class:"lfx-btn lfx-bv-open-btn",type:"button","data-group":l.type,text:_?"hide traces":`open traces (${S})`});A.disabled=!S,A.addEventListener("click",M=>{M.stopPropagation(),C(r,{kind:y.OPEN_GROUP,type:_?null:l.type})}),f.append(o("div",{class:`lfx-bv-group${_?" lfx-bv-open":""}`,"data-error":l.type},o("span",{class:"lfx-bv-cls lfx-err",text:l.type}),o("span",{class:"lfx-bv-cnt",text:`\xD7 ${p(l.count)}`}),o("span",{class:"lfx-err lfx-bv-msg",title:l.first_message,text:l.first_message}),o("span",{class:"lfx-muted",text:l.items.length?`items ${l.items.slice(0,5).join(", ")}${l.count>5?", \u2026":""}`:""}),A))}e.open_error&&f.append(o("div",{class:"lfx-err",text:e.open_error}))},L=()=>{k||(k=requestAnimationFrame(R))};n.add(L),r.on("change:explorer",()=>{B()}),R(),B(),C(r,{kind:y.SYNC,seq:t.seq});let K=I(s,r,()=>{D=!0,L()});return()=>{K(),n.delete(L),$?.remove?.(),k&&cancelAnimationFrame(k)}}}};export{pe as default};
